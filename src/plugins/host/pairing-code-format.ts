import { generateCode, hashSecret } from "../../crypto/secrets.js";

/**
 * Pairing codes: 10 characters from an alphabet without look-alikes (no 0/O, 1/I/L, U), shown as
 * `ABCDE-FGHJK`, typed in any case, with or without the dash or spaces. The first 4 characters are a
 * lookup handle, so a wrong guess is counted against the code it aimed at (a code is void after 5);
 * the other 6 are the secret part. 30^10 ≈ 2^49 in all; with 5 tries per code, a 10-minute life and
 * a per-address limit on enrollment, guessing is hopeless. Only digests of the handle and of the
 * whole code are stored.
 */
export const PAIRING_ALPHABET = "23456789ABCDEFGHJKMNPQRSTVWXYZ";
export const PAIRING_CODE_LENGTH = 10;
const HANDLE_LENGTH = 4;

export interface ParsedPairingCode {
  /** The canonical code: upper case, no separators. */
  code: string;
  handleHash: string;
  codeHash: string;
}

export function generatePairingCode(): string {
  return generateCode(PAIRING_ALPHABET, PAIRING_CODE_LENGTH);
}

/** `ABCDE-FGHJK`: how the code is shown. */
export function formatPairingCode(code: string): string {
  return `${code.slice(0, 5)}-${code.slice(5)}`;
}

/** Parses what a person typed; null when it cannot be a code at all. */
export function parsePairingCode(input: string): ParsedPairingCode | null {
  const code = input.toUpperCase().replace(/[\s-]/g, "");
  if (code.length !== PAIRING_CODE_LENGTH) return null;
  for (const char of code) if (!PAIRING_ALPHABET.includes(char)) return null;
  return digests(code);
}

export function digests(code: string): ParsedPairingCode {
  return { code, handleHash: hashSecret(`pairing-handle:${code.slice(0, HANDLE_LENGTH)}`), codeHash: hashSecret(`pairing-code:${code}`) };
}
