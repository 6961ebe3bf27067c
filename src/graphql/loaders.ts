import DataLoader from "dataloader";
import type { Reference, Tag } from "../domain/models.ts";
import type { DomainNode } from "../domain/nodes/node-service.ts";
import type { Services } from "../domain/services.ts";
import type { Page } from "../domain/shared/page.ts";
import type { WebhookAttempt } from "../domain/webhooks/webhook-models.ts";
import type { PageRequest } from "./pagination.ts";

/*
 * Per-request DataLoaders: every relation field goes through one, so a list of N parents costs one query per
 * relation, not N. Each batch function returns its results in the order of its keys. Loaders live in the
 * request's context and are dropped with it; they cache for the request only.
 */

/**
 * When a batch runs: DataLoader's own schedule (after the promise jobs queued so far, then a tick, so that the loads
 * of a whole level of the operation collect into one batch). With traces on, the promise job and the tick carry
 * the trace context of the load that started the batch (src/tracing/tracing-sdk.ts), so the batch's statements are
 * spans of the operation; with traces off nothing is carried and nothing of tracing runs here.
 */
const afterQueuedPromiseJobs = Promise.resolve();
const BATCH_IN_CALLERS_CONTEXT = {
  batchScheduleFn(dispatch: () => void): void {
    void afterQueuedPromiseJobs.then(() => process.nextTick(dispatch));
  },
};

/** One page of `Tag.references`: the tag and the page arguments. */
export interface TagReferencesKey extends PageRequest {
  readonly tagId: string;
}

export interface Loaders {
  /** A reference's tags, in name order. */
  readonly tagsByReferenceId: DataLoader<string, Tag[]>;
  /** A reference of the caller's organization by (lower-case) id; null when there is none. */
  readonly referenceById: DataLoader<string, Reference | null>;
  /** A bill of lading's or booking's child references, oldest first. */
  readonly childrenByParentId: DataLoader<string, Reference[]>;
  /** A page of the references carrying a tag. */
  readonly referencesByTag: DataLoader<TagReferencesKey, Page<Reference>, string>;
  /** A webhook delivery's attempts, oldest first (the delivery was read through the caller's organization). */
  readonly webhookAttemptsByDeliveryId: DataLoader<string, WebhookAttempt[]>;
  /** Any object of the caller's organization by (lower-case) id, whatever its type; null when there is none. */
  readonly nodeById: DataLoader<string, DomainNode | null>;
  /** Forgets everything loaded so far; a mutation calls it before it changes anything. */
  clearAll(): void;
}

/**
 * The loaders of one request. Each is made when a resolver first asks for it: most operations use one or two of
 * them (a reference with its tags and events uses none), and a DataLoader is a few objects and closures.
 */
class RequestLoaders implements Loaders {
  #tagsByReferenceId?: Loaders["tagsByReferenceId"];
  #referenceById?: Loaders["referenceById"];
  #childrenByParentId?: Loaders["childrenByParentId"];
  #referencesByTag?: Loaders["referencesByTag"];
  #webhookAttemptsByDeliveryId?: Loaders["webhookAttemptsByDeliveryId"];
  #nodeById?: Loaders["nodeById"];

  constructor(
    private readonly services: Services,
    private readonly organizationId: string,
  ) {}

  get tagsByReferenceId(): Loaders["tagsByReferenceId"] {
    const { tags } = this.services;
    return (this.#tagsByReferenceId ??= new DataLoader(async (ids) => {
      const byReference = await tags.tagsOfReferences(ids);
      return ids.map((id) => byReference.get(id) ?? []);
    }, BATCH_IN_CALLERS_CONTEXT));
  }

  get referenceById(): Loaders["referenceById"] {
    const { services, organizationId } = this;
    return (this.#referenceById ??= new DataLoader(async (ids) => {
      const found = new Map(
        (await services.references.referencesByIds(organizationId, ids)).map((reference) => [reference.id, reference]),
      );
      return ids.map((id) => found.get(id) ?? null);
    }, BATCH_IN_CALLERS_CONTEXT));
  }

  get childrenByParentId(): Loaders["childrenByParentId"] {
    const { references } = this.services;
    return (this.#childrenByParentId ??= new DataLoader(async (ids) => {
      const byParent = await references.childrenOfReferences(ids);
      return ids.map((id) => byParent.get(id) ?? []);
    }, BATCH_IN_CALLERS_CONTEXT));
  }

  // First pages (no cursor) of many tags come from one service call per page size: two queries in all.
  // A page with a cursor continues one tag's listing (a cursor is bound to its tag), so it is read alone;
  // asking for the second page of many tags in one operation is rare and is still bounded by the cost limit.
  get referencesByTag(): Loaders["referencesByTag"] {
    const { services, organizationId } = this;
    const { references } = services;
    return (this.#referencesByTag ??= new DataLoader(
      async (keys) => {
        const firstPages = new Map<number, Promise<Map<string, Page<Reference>>>>();
        for (const key of keys) {
          if (key.cursor !== undefined || firstPages.has(key.limit)) continue;
          const tagIds = keys
            .filter((other) => other.cursor === undefined && other.limit === key.limit)
            .map((other) => other.tagId);
          firstPages.set(key.limit, references.listFirstReferencesByTagIds(organizationId, tagIds, key.limit));
        }
        return Promise.all(
          keys.map(async (key) => {
            try {
              if (key.cursor !== undefined) {
                return await references.listReferences(organizationId, {
                  tagIds: [key.tagId],
                  limit: key.limit,
                  cursor: key.cursor,
                });
              }
              const page = (await firstPages.get(key.limit)!).get(key.tagId);
              if (!page) throw new Error(`no page of references for tag ${key.tagId}`);
              return page;
            } catch (error) {
              // One bad cursor fails its own field, not every tag of the batch.
              return error as Error;
            }
          }),
        );
      },
      { ...BATCH_IN_CALLERS_CONTEXT, cacheKeyFn: (key) => JSON.stringify([key.tagId, key.limit, key.cursor ?? null]) },
    ));
  }

  get webhookAttemptsByDeliveryId(): Loaders["webhookAttemptsByDeliveryId"] {
    const { webhooks } = this.services;
    return (this.#webhookAttemptsByDeliveryId ??= new DataLoader(async (ids) => {
      const byDelivery = await webhooks.findAttemptsByDeliveryIds(ids);
      return ids.map((id) => byDelivery.get(id) ?? []);
    }, BATCH_IN_CALLERS_CONTEXT));
  }

  // Every id of an operation (Query.node fields, Query.nodes lists) in one lookup: one query per kind of node.
  get nodeById(): Loaders["nodeById"] {
    const { services, organizationId } = this;
    return (this.#nodeById ??= new DataLoader(async (ids) => {
      const found = await services.nodes.findNodesByIds(organizationId, ids);
      return ids.map((id) => found.get(id) ?? null);
    }, BATCH_IN_CALLERS_CONTEXT));
  }

  clearAll(): void {
    this.#tagsByReferenceId?.clearAll();
    this.#referenceById?.clearAll();
    this.#childrenByParentId?.clearAll();
    this.#referencesByTag?.clearAll();
    this.#webhookAttemptsByDeliveryId?.clearAll();
    this.#nodeById?.clearAll();
  }
}

export function createLoaders(services: Services, organizationId: string): Loaders {
  return new RequestLoaders(services, organizationId);
}
