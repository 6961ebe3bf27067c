import { http, expectStatus, type HttpResult } from "./http.ts";
import { subscribe, type TestSubscription } from "./subscription-client.ts";
import type { TestServer } from "./test-server.ts";

/*
 * The feed to poll (`GET /v1/events`) as a poller uses it, and a live subscription with the same filters, so that
 * tests can compare the two.
 */

export interface FeedFilter {
  readonly referenceId?: string;
  readonly tagIds?: readonly string[];
  readonly tagNames?: readonly string[];
  readonly excludeTagIds?: readonly string[];
  readonly excludeTagNames?: readonly string[];
  /** REST spelling (`extraction_succeeded`). */
  readonly types?: readonly string[];
}

export interface FeedEvent {
  readonly id: string;
  readonly type: string;
  readonly reference_id: string;
}

export interface FeedPage {
  readonly data: FeedEvent[];
  readonly next_cursor: string;
  readonly has_more: boolean;
}

type Server = Pick<TestServer, "url" | "apiKey">;

/** The query string of one poll. */
export function feedQuery(filter: FeedFilter, extra: Record<string, string | number | undefined> = {}): string {
  const params = new URLSearchParams();
  if (filter.referenceId) params.append("reference_id", filter.referenceId);
  for (const id of filter.tagIds ?? []) params.append("tag_ids", id);
  for (const name of filter.tagNames ?? []) params.append("tag_names", name);
  for (const id of filter.excludeTagIds ?? []) params.append("exclude_tag_ids", id);
  for (const name of filter.excludeTagNames ?? []) params.append("exclude_tag_names", name);
  for (const type of filter.types ?? []) params.append("type", type);
  for (const [key, value] of Object.entries(extra)) if (value !== undefined) params.append(key, String(value));
  return params.toString();
}

export async function poll(
  server: Server,
  filter: FeedFilter = {},
  extra: Record<string, string | number | undefined> = {},
): Promise<HttpResult<FeedPage>> {
  return http<FeedPage>(server, "GET", `/v1/events?${feedQuery(filter, extra)}`);
}

/** Follows `next_cursor` from `after` until the feed has nothing more now; returns the ids and the last cursor. */
export async function pollToEnd(
  server: Server,
  filter: FeedFilter,
  after?: string,
  limit = 7,
): Promise<{ ids: string[]; cursor: string }> {
  const ids: string[] = [];
  let cursor = after;
  for (;;) {
    const page = await poll(server, filter, { after: cursor, limit });
    expectStatus(page, 200);
    ids.push(...page.body.data.map((event) => event.id));
    cursor = page.body.next_cursor;
    if (page.body.data.length === 0 && !page.body.has_more) return { ids, cursor };
  }
}

const EVENTS = `
  subscription Feed($referenceId: ID, $tagIds: [ID!], $tagNames: [String!], $excludeTagIds: [ID!],
      $excludeTagNames: [String!], $types: [LifecycleEventType!], $after: String) {
    lifecycleEvents(referenceId: $referenceId, tagIds: $tagIds, tagNames: $tagNames, excludeTagIds: $excludeTagIds,
        excludeTagNames: $excludeTagNames, types: $types, after: $after) {
      cursor
      node { id }
    }
  }`;

export interface FeedMessage {
  lifecycleEvents: { cursor: string; node: { id: string } };
}

/** A graphql-ws subscription with the feed's filters, from `after`. */
export function subscribeLikeFeed(server: Server, filter: FeedFilter, after?: string): TestSubscription<FeedMessage> {
  return subscribe<FeedMessage>(server, EVENTS, {
    ...filter,
    ...(filter.types && { types: filter.types.map((type) => type.toUpperCase()) }),
    ...(after !== undefined && { after }),
  });
}

export const subscriptionIds = (subscription: TestSubscription<FeedMessage>): string[] =>
  subscription.data.map((message) => message.lifecycleEvents.node.id);
