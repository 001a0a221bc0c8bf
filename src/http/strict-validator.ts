import type { TSchema } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { ValueErrorType } from "@sinclair/typebox/errors";
import type { FastifySchemaCompiler } from "fastify";

/**
 * A validator for JSON APIs that refuses unknown fields instead of dropping them, as Fastify's
 * default Ajv does (`removeAdditional`): a misspelt optional field (`expiresInDay`) must be a clear
 * 400, not silently ignored. TypeBox's own checker, no coercion. Errors come out in Ajv's shape
 * (keyword, instancePath, params), which the app's one error handler reads. Register it in an
 * encapsulated plugin with `fastify.setValidatorCompiler(strictValidatorCompiler)`: a plugin sets it for
 * its own routes so it holds in whatever app embeds it.
 */
export const strictValidatorCompiler: FastifySchemaCompiler<TSchema> = ({ schema }) => {
  const check = TypeCompiler.Compile(schema);
  return (value: unknown) => {
    if (check.Check(value)) return { value };
    const first = check.Errors(value).First();
    if (!first) return { error: [{ keyword: "type", instancePath: "", params: {}, message: "is invalid" }] as never };
    const slash = first.path.lastIndexOf("/");
    const parent = first.path.slice(0, Math.max(0, slash));
    const key = first.path
      .slice(slash + 1)
      .replaceAll("~1", "/")
      .replaceAll("~0", "~");
    const message = first.message.charAt(0).toLowerCase() + first.message.slice(1);
    const error =
      first.type === ValueErrorType.ObjectRequiredProperty
        ? { keyword: "required", instancePath: parent, params: { missingProperty: key }, message }
        : first.type === ValueErrorType.ObjectAdditionalProperties
          ? { keyword: "additionalProperties", instancePath: parent, params: { additionalProperty: key }, message }
          : first.type === ValueErrorType.StringPattern
            ? { keyword: "pattern", instancePath: first.path, params: { pattern: (first.schema as { pattern?: string }).pattern }, message }
            : { keyword: ValueErrorType[first.type] ?? "type", instancePath: first.path, params: {}, message };
    return { error: [error] as never };
  };
};
