import type { LifecycleEvent } from "../lifecycle/lifecycle-event.ts";
import type { LifecycleLogService } from "../lifecycle/lifecycle-log-service.ts";
import type { Reference, ReferenceUpdate, Tag } from "../models.ts";
import { isUuid } from "../shared/ids.ts";
import type { Store } from "../store.ts";
import type { WebhookAttempt, WebhookDeliveryView, WebhookEndpoint } from "../webhooks/webhook-models.ts";

/*
 * Global object identification (the Relay `Node` interface). Glossary:
 * - node: any object a client may fetch again by its id alone, whatever its type.
 *
 * Ids are the same plain UUIDv7 on every surface, not typed global ids: a UUIDv7 is unique across
 * every table, so an id names one object, and finding its type is a lookup. Looking up N ids costs one query
 * per kind of node, whatever N is.
 */

/** A node and the kind it is, so that an adapter can name its type. */
export type DomainNode =
  | { readonly kind: "Tag"; readonly value: Tag }
  | { readonly kind: "Reference"; readonly value: Reference }
  | { readonly kind: "ReferenceUpdate"; readonly value: ReferenceUpdate }
  | { readonly kind: "LifecycleEvent"; readonly value: LifecycleEvent }
  | { readonly kind: "WebhookEndpoint"; readonly value: WebhookEndpoint }
  | { readonly kind: "WebhookDelivery"; readonly value: WebhookDeliveryView }
  | { readonly kind: "WebhookAttempt"; readonly value: WebhookAttempt };

export type NodeKind = DomainNode["kind"];

export class NodeService {
  constructor(
    private readonly store: Store,
    private readonly lifecycleLog: Pick<LifecycleLogService, "retentionCutoff">,
  ) {}

  /**
   * The caller's objects among `ids`, by (lower-case) id. An id that is malformed, unknown, of another
   * organization, or of an event past retention is simply absent: indistinguishable from missing.
   * Costs seven queries (one per kind of node, run together), or none when no id is well-formed.
   */
  async findNodesByIds(organizationId: string, ids: readonly string[]): Promise<Map<string, DomainNode>> {
    const wanted = [...new Set(ids.filter(isUuid).map((id) => id.toLowerCase()))];
    const found = new Map<string, DomainNode>();
    if (wanted.length === 0) return found;
    const { store } = this;
    const [tags, references, updates, events, endpoints, deliveries, attempts] = await Promise.all([
      store.tags.findTagsByIds(organizationId, wanted),
      store.references.findReferencesByIds(organizationId, wanted),
      store.references.findReferenceUpdatesByIds(organizationId, wanted),
      store.lifecycle.findEventsByIds(organizationId, wanted, this.lifecycleLog.retentionCutoff()),
      store.webhooks.findEndpointsByIds(wanted),
      store.webhooks.findDeliveriesByIds(organizationId, wanted),
      store.webhooks.findAttemptsByIds(organizationId, wanted),
    ]);
    for (const value of tags) found.set(value.id, { kind: "Tag", value });
    for (const value of references) found.set(value.id, { kind: "Reference", value });
    for (const value of updates) found.set(value.id, { kind: "ReferenceUpdate", value });
    for (const value of events) found.set(value.id, { kind: "LifecycleEvent", value });
    for (const value of endpoints) {
      if (value.organizationId === organizationId) found.set(value.id, { kind: "WebhookEndpoint", value });
    }
    for (const value of deliveries) found.set(value.id, { kind: "WebhookDelivery", value });
    for (const value of attempts) found.set(value.id, { kind: "WebhookAttempt", value });
    return found;
  }
}
