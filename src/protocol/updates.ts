/**
 * Update reports: after every update it attempts, automatic or by hand, a device tells the server how it
 * went (`POST /api/host/update-report`, device token), and the owner sees the last one on /devices. The
 * server may also name a minimum tether-host version: it says so at hello (`minimumHostVersion`), and
 * /devices shows an older device as outdated.
 */
import { Type, type Static } from "@sinclair/typebox";

const Version = Type.String({ minLength: 5, maxLength: 64, pattern: "^\\d+\\.\\d+\\.\\d+" });

export const UpdateReportSchema = Type.Object(
  {
    /** True when the new executable is in place. */
    ok: Type.Boolean(),
    /** The version that ran the update. */
    from: Version,
    /** The version offered, when the manifest could be read. */
    to: Type.Optional(Version),
    /** `auto`: on the server's announcement; `manual`: `tether-host update`. */
    trigger: Type.Union([Type.Literal("auto"), Type.Literal("manual")]),
    /** Why it failed (`UPDATE_DIGEST_MISMATCH`, `MANIFEST_SIGNATURE_INVALID`, …). */
    code: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: "^[A-Z][A-Z0-9_]*$" })),
    message: Type.Optional(Type.String({ maxLength: 1000 })),
    /** When the device made the attempt (its clock). */
    at: Type.String({ minLength: 1, maxLength: 40 }),
  },
  { additionalProperties: false },
);
export type UpdateReport = Static<typeof UpdateReportSchema>;

/** Exit code of a tether-host that replaced its own executable and must be started again (by its service manager). */
export const UPDATED_EXIT_CODE = 10;
