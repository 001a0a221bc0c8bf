/**
 * The building blocks of JSON response schemas. Every JSON route declares a schema for each status it
 * sends: Fastify serialises with it (fast-json-stringify), and only the declared properties go out, so
 * a column or field added to a row later never reaches a client unless a schema names it.
 */
import { Type, type TSchema } from "@sinclair/typebox";

/** The one error body of every JSON API (see error-handler.ts). */
export const ErrorResponse = Type.Object({ code: Type.String(), message: Type.String() });

/** A Date on the way in; fast-json-stringify writes it as an ISO 8601 string. */
export const DateTime = Type.Unsafe<Date | string>({ type: "string", format: "date-time" });

export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** 204 No Content: no body (`reply.code(204).send()`). */
export const NoContent = Type.Unsafe<undefined>({ type: "null", description: "No content" });

/** `{ ok: true }`: an act that has nothing else to say. */
export const Done = Type.Object({ ok: Type.Boolean() });

/** A route's response schemas: its own successes, plus the shared error body for every 4xx and 5xx. */
export function jsonResponses<Success extends Record<number, TSchema>>(success: Success) {
  return { ...success, "4xx": ErrorResponse, "5xx": ErrorResponse };
}
