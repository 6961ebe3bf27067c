import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, type Page } from "../domain/shared/page.ts";
import { badUserInput } from "../pipeline/errors/graphql-errors.ts";

/*
 * Relay connections over the domain's keyset pages. Glossary: a *forward* page is read with `first`/`after`
 * in the listing's natural order; a *backward* page with `last`/`before` is read by the service in the
 * opposite order and reversed here, so edges are always in natural order.
 */

export interface Edge<T> {
  readonly cursor: string;
  readonly node: T;
}

export interface Connection<T> {
  readonly edges: Edge<T>[];
  readonly pageInfo: {
    readonly hasNextPage: boolean;
    readonly hasPreviousPage: boolean;
    readonly startCursor: string | null;
    readonly endCursor: string | null;
  };
}

/** What a service needs to read one page. */
export interface PageRequest {
  readonly limit: number;
  readonly cursor?: string;
}

/** A page request and its direction: `backward` means "read in reverse order, then reverse the page". */
export interface DirectedPageRequest extends PageRequest {
  readonly direction: "forward" | "backward";
}

interface ForwardArgs {
  readonly first?: number | null;
  readonly after?: string | null;
}

interface BidirectionalArgs extends ForwardArgs {
  readonly last?: number | null;
  readonly before?: string | null;
}

/** A page size argument: 1 to 500; absent means 50. @throws BAD_USER_INPUT naming the argument. */
function pageSize(value: number | null | undefined, argument: string): number {
  if (value === null || value === undefined) return DEFAULT_PAGE_SIZE;
  if (!Number.isInteger(value) || value < 1 || value > MAX_PAGE_SIZE) {
    throw badUserInput(`${argument} must be an integer from 1 to ${MAX_PAGE_SIZE}`, [argument]);
  }
  return value;
}

/** `first`/`after` as a service page request. @throws BAD_USER_INPUT */
export function forwardPage(args: ForwardArgs): PageRequest {
  return { limit: pageSize(args.first, "first"), ...(args.after ? { cursor: args.after } : {}) };
}

/**
 * `first`/`after` or `last`/`before` (not both directions at once) as a directed page request.
 * @throws BAD_USER_INPUT when arguments of both directions are given.
 */
export function bidirectionalPage(args: BidirectionalArgs): DirectedPageRequest {
  const backward = (args.last ?? args.before ?? null) !== null;
  const forward = (args.first ?? args.after ?? null) !== null;
  if (backward && forward) {
    throw badUserInput("Give first/after to page forward or last/before to page backward, not both", [
      args.last !== null && args.last !== undefined ? "last" : "before",
    ]);
  }
  if (!backward) return { direction: "forward", ...forwardPage(args) };
  return {
    direction: "backward",
    limit: pageSize(args.last, "last"),
    ...(args.before ? { cursor: args.before } : {}),
  };
}

/** A forward page as a connection. */
export function toConnection<T>(page: Page<T>): Connection<T> {
  const edges = page.items.map((node, index) => ({ cursor: page.cursors[index]!, node }));
  return {
    edges,
    pageInfo: {
      hasNextPage: page.nextCursor !== null,
      hasPreviousPage: page.hasPreviousPage,
      startCursor: edges[0]?.cursor ?? null,
      endCursor: edges.at(-1)?.cursor ?? null,
    },
  };
}

/**
 * A page the service read in reverse order (newest first, for `last`/`before`) as a connection in natural
 * order: what the service calls "next" lies before this page.
 */
export function toBackwardConnection<T>(page: Page<T>): Connection<T> {
  const edges = page.items.map((node, index) => ({ cursor: page.cursors[index]!, node })).reverse();
  return {
    edges,
    pageInfo: {
      hasNextPage: page.hasPreviousPage,
      hasPreviousPage: page.nextCursor !== null,
      startCursor: edges[0]?.cursor ?? null,
      endCursor: edges.at(-1)?.cursor ?? null,
    },
  };
}
