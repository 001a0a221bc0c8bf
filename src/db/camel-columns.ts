/** `last_seen_at` → `lastSeenAt`, at the type level. */
export type CamelCase<S extends string> = S extends `${infer Head}_${infer Tail}` ? `${Head}${Capitalize<CamelCase<Tail>>}` : S;

export type CamelColumns<Row, K extends keyof Row & string> = { [P in K as CamelCase<P>]: Row[P] };

/**
 * The named columns of a row under camelCase keys, in the order given: how a table's snake_case row becomes
 * the object the API and pages show, written once instead of a hand-made object per table.
 */
export function camelColumns<Row, K extends keyof Row & string>(row: Row, columns: readonly K[]): CamelColumns<Row, K> {
  const out: Record<string, unknown> = {};
  for (const column of columns) out[column.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase())] = row[column];
  return out as CamelColumns<Row, K>;
}
