import { HttpError } from "../../http/errors.js";

/**
 * An extension point for limits a token carries beyond its scopes, filled by the plugins that know
 * what is limited (the host plugin registers "devices"). The session plugin knows only that a grant is
 * a named list of ids, checked and stored by its owner: `POST /api/tokens` takes
 * `{"grants": {"devices": ["<id>"]}}`, the token list shows them, the settings form offers them.
 * A token without a grant of a kind is unlimited in that kind.
 */
export interface TokenGrantKind {
  /** The grant's name in `grants` (lowercase letters). */
  name: string;
  /** What the settings form calls it, e.g. "Devices". */
  label: string;
  /** A line under the choices on the settings form. */
  hint: string;
  /** Checks the ids `userId` chose: throws a 4xx `HttpError` to refuse (unknown or another user's ids). */
  check(userId: string, ids: readonly string[]): Promise<string[]>;
  /** Stores the checked ids for a new token (before its value leaves the server). */
  store(userId: string, tokenId: string, ids: readonly string[]): Promise<void>;
  /** The user's tokens' stored grants of this kind, by token id. */
  load(userId: string, tokenIds: readonly string[]): Promise<Map<string, string[]>>;
  /** The token was revoked: its grant goes too. */
  forget(userId: string, tokenId: string): Promise<void>;
  /** What the settings form offers `userId` (`label` is shown escaped). */
  choices(userId: string): Promise<{ id: string; label: string }[]>;
  /** How the token list names a granted id that is no longer a choice (e.g. a revoked device). */
  goneLabel: string;
}

export type TokenGrants = Record<string, string[]>;

export class TokenGrantRegistry {
  readonly #kinds = new Map<string, TokenGrantKind>();

  add(kind: TokenGrantKind): void {
    if (this.#kinds.has(kind.name)) throw new Error(`A token grant named "${kind.name}" is already registered`);
    this.#kinds.set(kind.name, kind);
  }

  get kinds(): TokenGrantKind[] {
    return [...this.#kinds.values()];
  }

  /** Every requested grant checked by its owner; an unknown kind or an empty list is a 400. */
  async check(userId: string, grants: TokenGrants | undefined): Promise<TokenGrants> {
    const checked: TokenGrants = {};
    for (const [name, ids] of Object.entries(grants ?? {})) {
      const kind = this.#kinds.get(name);
      if (!kind) throw new HttpError(400, "INVALID_INPUT", `body: "grants" has no kind "${name.slice(0, 40)}" here`);
      if (ids.length === 0) throw new HttpError(400, "INVALID_INPUT", `body: "grants.${name}" must name at least one; leave it out for no limit`);
      checked[name] = await kind.check(userId, ids);
    }
    return checked;
  }

  async store(userId: string, tokenId: string, grants: TokenGrants): Promise<void> {
    for (const [name, ids] of Object.entries(grants)) await this.#kinds.get(name)!.store(userId, tokenId, ids);
  }

  /** Each token's grants (only the kinds it has), by token id. */
  async load(userId: string, tokenIds: readonly string[]): Promise<Map<string, TokenGrants>> {
    const byToken = new Map<string, TokenGrants>();
    for (const kind of this.#kinds.values()) {
      for (const [tokenId, ids] of await kind.load(userId, tokenIds)) byToken.set(tokenId, { ...byToken.get(tokenId), [kind.name]: ids });
    }
    return byToken;
  }

  async forget(userId: string, tokenId: string): Promise<void> {
    for (const kind of this.#kinds.values()) await kind.forget(userId, tokenId);
  }
}
