import { CLI_CHANGE, type ChangeContext } from "../audit/audit-event.ts";
import type { AuditLogService } from "../audit/audit-log-service.ts";
import type { Clock } from "../shared/clock.ts";
import type { CursorCodec } from "../shared/cursor.ts";
import { DomainError, notFound, validationFailed, type FieldIssue } from "../shared/errors.ts";
import { isUuid, newId } from "../shared/ids.ts";
import { pageOf, type Page } from "../shared/page.ts";
import type { Store } from "../store.ts";
import type { WebhookTargetPolicy } from "./endpoint-url.ts";
import { validateEndpointInput, type WebhookEndpointInput } from "./webhook-endpoint-input.ts";
import { buildTestBody } from "./webhook-body.ts";
import {
  DELIVERY_STATUSES,
  TEST_EVENT_TYPE,
  type DeliveryStatus,
  type WebhookAttempt,
  type WebhookDelivery,
  type WebhookDeliveryView,
  type WebhookDeliveryWithAttempts,
  type WebhookEndpoint,
} from "./webhook-models.ts";
import { generateSigningKey } from "./signing-keys.ts";
import { endpointChanges } from "./endpoint-audit.ts";

export interface ListDeliveriesInput {
  readonly status?: string;
  readonly limit: number;
  readonly cursor?: string;
}

/**
 * An endpoint with its secret, as returned once by creation and rotation: the HMAC secret (`whsec_`), or null
 * for an ed25519 endpoint, whose private key never leaves the server (its public key is `endpoint.publicKey`).
 */
export interface EndpointWithSecret {
  readonly endpoint: WebhookEndpoint;
  readonly secret: string | null;
}

/** A secret rotated out keeps signing beside the new one for this long (SPEC §9). */
export const PREVIOUS_SECRET_VALIDITY_MS = 24 * 60 * 60 * 1000;
export const MAX_ENDPOINTS_PER_ORGANIZATION = 50;

type IdPosition = { readonly i: string };
const isIdPosition = (value: unknown): value is IdPosition =>
  typeof value === "object" && value !== null && isUuid((value as IdPosition).i);

/**
 * Webhook endpoints and their deliveries, as the organization manages and reads them (SPEC §9). Sending is
 * the worker's (src/webhooks/); this service queues test events and re-sends, and tells the worker through
 * `onQueued`.
 */
export class WebhookService {
  private readonly queuedListeners = new Set<(delivery: WebhookDelivery) => void>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly cursors: CursorCodec,
    private readonly targets: WebhookTargetPolicy,
    private readonly audit: AuditLogService,
  ) {}

  /**
   * Creates an endpoint (enabled unless `enabled: false`) with a new signing key of its `signing` (HMAC unless
   * "ed25519"): an HMAC secret is returned here only; an ed25519 private key never (its public key is readable).
   * @throws VALIDATION_FAILED (url syntax or refused target, unknown event types, tag ids that are not tags of
   *   the organization, description), LIMIT_EXCEEDED. Nothing is written then.
   * `change` (who makes it, for the audit log, written in the same transaction): the operator's CLI by default;
   * every adapter serving a request passes its caller's. So do the other administrative methods below.
   */
  async createEndpoint(
    organizationId: string,
    input: WebhookEndpointInput,
    change: ChangeContext = CLI_CHANGE,
  ): Promise<EndpointWithSecret> {
    if (input.url === undefined && (input.destination === undefined || input.destination === null))
      throw validationFailed([
        { path: ["url"], code: "REQUIRED", message: "url is required (or a message broker's destination instead)" },
      ]);
    const changes = await validateEndpointInput(input, this.targets);
    const now = this.clock.now();
    const signing = changes.signing ?? "hmac-sha256";
    const key = generateSigningKey(signing);
    const endpoint: WebhookEndpoint = {
      id: newId(),
      organizationId,
      url: changes.url ?? null,
      destination: changes.destination ?? null,
      eventTypes: changes.eventTypes ?? null,
      tagIds: changes.tagIds ? [...new Set(changes.tagIds)].sort() : null,
      description: changes.description ?? null,
      enabled: changes.enabled ?? true,
      disabledReason: null,
      secret: key.secret,
      signing,
      publicKey: key.publicKey,
      maxDeliveriesPerSecond: changes.maxDeliveriesPerSecond ?? null,
      previousSecrets: [],
      previousSecretExpiresAt: null,
      failingSince: null,
      ordering: changes.ordering ?? "none",
      createdAt: now,
      updatedAt: now,
      version: 0,
    };
    await this.store.transaction(async (store) => {
      // The limit is decided under the organization's lock (PostgreSQL; SQLite runs one writer at a time): two
      // instances creating at once would otherwise both count 49 and both insert. The count is sent with the
      // lock and runs after it, on a snapshot that sees every creation committed before.
      const [, count] = await Promise.all([
        store.organizations.lockOrganization(organizationId),
        store.webhooks.countEndpoints(organizationId),
      ]);
      if (count >= MAX_ENDPOINTS_PER_ORGANIZATION) {
        throw new DomainError(
          "LIMIT_EXCEEDED",
          `An organization has at most ${MAX_ENDPOINTS_PER_ORGANIZATION} webhook endpoints`,
          [],
          {
            limit: MAX_ENDPOINTS_PER_ORGANIZATION,
          },
        );
      }
      await store.webhooks.insertEndpoint(endpoint);
      if (changes.tagIds) await this.writeTagFilter(store, endpoint, changes.tagIds);
      await this.audit.record(store, change, {
        organizationId,
        action: "webhook_endpoint.created",
        target: { type: "webhook_endpoint", id: endpoint.id },
        changes: endpointChanges(null, endpoint),
      });
    });
    return { endpoint, secret: key.publicKey === null ? key.secret : null };
  }

  /** @throws NOT_FOUND */
  async getEndpoint(organizationId: string, id: string): Promise<WebhookEndpoint> {
    return this.getEndpointIn(this.store, organizationId, id);
  }

  /** Newest first. @throws INVALID_CURSOR */
  async listEndpoints(
    organizationId: string,
    input: { limit: number; cursor?: string },
  ): Promise<Page<WebhookEndpoint>> {
    const filters = { scope: "webhook_endpoints" };
    const after = input.cursor ? this.cursors.decode(input.cursor, filters, isIdPosition) : undefined;
    const rows = await this.store.webhooks.listEndpoints(organizationId, after?.i, input.limit + 1);
    return this.page(rows, input.limit, filters, after !== undefined);
  }

  /**
   * Changes the given fields. Disabling fails the deliveries waiting for the endpoint; enabling a disabled
   * endpoint clears why it was disabled and its failure streak. Deliveries it missed while disabled are not
   * sent (re-send them by hand). `tagIds` replaces the tag filter; it applies to events written from then on.
   * `maxDeliveriesPerSecond` applies from the next claim. `signing` cannot change (a new scheme needs a new key,
   * which only creation and rotation hand over): the same value is accepted, another one refused.
   * @throws NOT_FOUND, VALIDATION_FAILED (nothing is changed then).
   */
  async updateEndpoint(
    organizationId: string,
    id: string,
    input: WebhookEndpointInput,
    change: ChangeContext = CLI_CHANGE,
  ): Promise<WebhookEndpoint> {
    const before = await this.getEndpoint(organizationId, id);
    const changes = await validateEndpointInput(input, this.targets, before.destination);
    if (changes.signing !== undefined && changes.signing !== before.signing)
      throw validationFailed([
        {
          path: ["signing"],
          code: "IMMUTABLE",
          message: `signing is fixed at creation (this endpoint signs with ${before.signing}); create a new endpoint to change it`,
        },
      ]);
    return this.store.transaction(async (store) => {
      // Read again under the endpoint's lock: the row written below is the current one with these changes, so a
      // rotation (or a worker's update) committed meanwhile is not overwritten.
      const current = await this.lockEndpointIn(store, organizationId, id);
      const enabling = changes.enabled === true && !current.enabled;
      const updated: WebhookEndpoint = {
        ...current,
        ...(changes.url !== undefined && { url: changes.url }),
        ...(changes.destination !== undefined && { destination: changes.destination }),
        ...(changes.destination && { url: null }),
        ...(changes.eventTypes !== undefined && { eventTypes: changes.eventTypes }),
        ...(changes.tagIds !== undefined && { tagIds: changes.tagIds && [...new Set(changes.tagIds)].sort() }),
        ...(changes.description !== undefined && { description: changes.description }),
        ...(changes.enabled !== undefined && { enabled: changes.enabled }),
        ...(changes.ordering !== undefined && { ordering: changes.ordering }),
        ...(changes.maxDeliveriesPerSecond !== undefined && { maxDeliveriesPerSecond: changes.maxDeliveriesPerSecond }),
        ...((enabling || changes.enabled === false) && { disabledReason: null }),
        ...(enabling && { failingSince: null }),
        updatedAt: this.clock.now(),
        version: current.version + 1,
      };
      await store.webhooks.updateEndpoint(updated);
      if (changes.tagIds !== undefined) await this.writeTagFilter(store, updated, changes.tagIds ?? []);
      // A disabled endpoint receives nothing: what was waiting for it fails now (it can be re-sent by hand).
      if (current.enabled && !updated.enabled)
        await store.webhooks.failPendingDeliveries(updated.id, updated.updatedAt);
      // Ordering ends for what is waiting too: nothing stays held back by an order the endpoint no longer has.
      if (current.ordering === "reference" && updated.ordering === "none")
        await store.webhookRecovery.releaseOrder(updated.id);
      await this.audit.record(store, change, {
        organizationId,
        action: "webhook_endpoint.updated",
        target: { type: "webhook_endpoint", id: updated.id },
        changes: endpointChanges(current, updated),
      });
      return updated;
    });
  }

  /** Deletes the endpoint with its deliveries and their attempts. @throws NOT_FOUND */
  async deleteEndpoint(organizationId: string, id: string, change: ChangeContext = CLI_CHANGE): Promise<void> {
    const deleted =
      isUuid(id) &&
      (await this.store.transaction(async (store) => {
        const before = await store.webhooks.findEndpoint(organizationId, id.toLowerCase());
        if (!before || !(await store.webhooks.deleteEndpoint(organizationId, before.id))) return false;
        await this.audit.record(store, change, {
          organizationId,
          action: "webhook_endpoint.deleted",
          target: { type: "webhook_endpoint", id: before.id },
          changes: endpointChanges(before, null),
        });
        return true;
      }));
    if (!deleted) throw notFound("webhook endpoint");
  }

  /**
   * Issues a new signing key of the endpoint's scheme: an HMAC secret is returned here only; an ed25519 key's
   * public half is the endpoint's `publicKey` from now on. The current key keeps signing beside the new one for
   * 24 hours, and so does every key rotated out within the last 24 hours (a second rotation drops none of them).
   * @throws NOT_FOUND
   */
  async rotateSecret(
    organizationId: string,
    id: string,
    change: ChangeContext = CLI_CHANGE,
  ): Promise<EndpointWithSecret> {
    return this.store.transaction(async (store) => {
      // Under the endpoint's lock: parallel rotations each keep the secrets the one before issued.
      const current = await this.lockEndpointIn(store, organizationId, id);
      const now = this.clock.now();
      const key = generateSigningKey(current.signing);
      const expiresAt = new Date(now.getTime() + PREVIOUS_SECRET_VALIDITY_MS);
      const endpoint: WebhookEndpoint = {
        ...current,
        secret: key.secret,
        publicKey: key.publicKey,
        previousSecrets: [
          { secret: current.secret, expiresAt },
          ...current.previousSecrets.filter((previous) => previous.expiresAt > now),
        ],
        previousSecretExpiresAt: expiresAt,
        updatedAt: now,
        version: current.version + 1,
      };
      await store.webhooks.updateEndpoint(endpoint);
      // The secret itself is never recorded; an ed25519 endpoint's public key is (it is no secret).
      await this.audit.record(store, change, {
        organizationId,
        action:
          current.signing === "hmac-sha256"
            ? "webhook_endpoint.secret_rotated"
            : "webhook_endpoint.signing_key_rotated",
        target: { type: "webhook_endpoint", id: endpoint.id },
        changes:
          key.publicKey === null
            ? { previous_secret_expires_at: { from: null, to: expiresAt.toISOString() } }
            : { public_key: { from: current.publicKey, to: key.publicKey } },
      });
      return { endpoint, secret: key.publicKey === null ? key.secret : null };
    });
  }

  /**
   * Queues a `webhook_test` event for the endpoint, whatever its event-type filter.
   * @throws NOT_FOUND, CONFLICT when the endpoint is disabled.
   */
  async sendTestEvent(organizationId: string, id: string): Promise<WebhookDeliveryView> {
    const endpoint = await this.getEndpoint(organizationId, id);
    if (!endpoint.enabled)
      throw new DomainError("CONFLICT", "The webhook endpoint is disabled; enable it to send to it");
    const now = this.clock.now();
    const eventId = newId();
    const delivery: WebhookDelivery = {
      id: newId(),
      organizationId,
      endpointId: endpoint.id,
      eventId,
      eventType: TEST_EVENT_TYPE,
      body: buildTestBody(eventId, organizationId, endpoint.id, now),
      status: "pending",
      attemptCount: 0,
      attemptsSinceQueued: 0,
      nextAttemptAt: now,
      leaseOwner: null,
      leaseExpiresAt: null,
      createdAt: now,
      updatedAt: now,
      orderingKey: null,
      eventOccurredAt: null,
      droppedReason: null,
    };
    await this.store.webhooks.insertDeliveries([delivery]);
    this.notifyQueued(delivery);
    // A test event keeps no reference's order, so nothing holds it back.
    return { ...delivery, heldBack: false, heldBackReason: null };
  }

  /**
   * An endpoint's deliveries, newest first, optionally of one status.
   * @throws NOT_FOUND, INVALID_QUERY_PARAMETER (unknown status), INVALID_CURSOR, CURSOR_FILTER_MISMATCH.
   */
  async listDeliveries(
    organizationId: string,
    endpointId: string,
    input: ListDeliveriesInput,
  ): Promise<Page<WebhookDeliveryView>> {
    if (input.status !== undefined && !(DELIVERY_STATUSES as readonly string[]).includes(input.status)) {
      throw new DomainError("INVALID_QUERY_PARAMETER", `status must be one of ${DELIVERY_STATUSES.join(", ")}`, [
        { path: ["status"], code: "INVALID_ENUM", message: `must be one of ${DELIVERY_STATUSES.join(", ")}` },
      ]);
    }
    const endpoint = await this.getEndpoint(organizationId, endpointId);
    const filters = { scope: "webhook_deliveries", endpointId: endpoint.id, status: input.status };
    const after = input.cursor ? this.cursors.decode(input.cursor, filters, isIdPosition) : undefined;
    const rows = await this.store.webhooks.listDeliveries({
      endpointId: endpoint.id,
      status: input.status as DeliveryStatus | undefined,
      beforeId: after?.i,
      limit: input.limit + 1,
    });
    return this.page(rows, input.limit, filters, after !== undefined);
  }

  /**
   * One delivery with its attempts, oldest first. With `endpointId`, the delivery must belong to it.
   * @throws NOT_FOUND
   */
  async getDelivery(
    organizationId: string,
    endpointId: string | null,
    deliveryId: string,
  ): Promise<WebhookDeliveryWithAttempts> {
    const delivery = await this.findDelivery(organizationId, endpointId, deliveryId);
    const attempts = (await this.store.webhooks.findAttemptsByDeliveryIds([delivery.id])).get(delivery.id) ?? [];
    return { ...delivery, attempts };
  }

  /** Attempts of deliveries already read through this service (GraphQL's loader), oldest first. */
  findAttemptsByDeliveryIds(deliveryIds: readonly string[]): Promise<Map<string, WebhookAttempt[]>> {
    return this.store.webhooks.findAttemptsByDeliveryIds(deliveryIds);
  }

  /**
   * Sends a delivery again, now, with the same webhook-id and body, whatever its status; it gets a fresh
   * retry schedule. Earlier attempts stay in its log. On an ordered endpoint it goes out before the later pending
   * deliveries of its reference, which wait behind it (the database decides, see the repository).
   * @throws NOT_FOUND, CONFLICT when the endpoint is disabled.
   */
  async resendDelivery(
    organizationId: string,
    endpointId: string | null,
    deliveryId: string,
  ): Promise<WebhookDeliveryView> {
    const delivery = await this.findDelivery(organizationId, endpointId, deliveryId);
    const endpoint = await this.getEndpoint(organizationId, delivery.endpointId);
    if (!endpoint.enabled)
      throw new DomainError("CONFLICT", "The webhook endpoint is disabled; enable it to send to it");
    const requeued = await this.store.webhooks.requeueDelivery(delivery.id, this.clock.now());
    if (!requeued) throw notFound("webhook delivery");
    this.notifyQueued(requeued);
    // A re-send goes out outside its reference's order (its ordering key is cleared), so nothing holds it back.
    return { ...requeued, heldBack: false, heldBackReason: null };
  }

  /** Called after a delivery was queued outside an event's transaction (test events, re-sends). */
  onQueued(listener: (delivery: WebhookDelivery) => void): () => void {
    this.queuedListeners.add(listener);
    return () => this.queuedListeners.delete(listener);
  }

  private notifyQueued(delivery: WebhookDelivery): void {
    for (const listener of this.queuedListeners) listener(delivery);
  }

  private async findDelivery(
    organizationId: string,
    endpointId: string | null,
    deliveryId: string,
  ): Promise<WebhookDeliveryView> {
    const delivery = isUuid(deliveryId)
      ? await this.store.webhooks.findDelivery(organizationId, deliveryId.toLowerCase())
      : null;
    if (!delivery || (endpointId !== null && delivery.endpointId !== endpointId.toLowerCase()))
      throw notFound("webhook delivery");
    return delivery;
  }

  /**
   * Writes the endpoint's tag filter rows inside the caller's transaction. The insert itself keeps only tags of
   * the organization, so an id that is unknown, of another organization or deleted meanwhile is refused here
   * and the transaction rolls back. `asSent` is the list as the caller sent it (duplicates included), so that
   * an issue's index points into the request.
   */
  private async writeTagFilter(store: Store, endpoint: WebhookEndpoint, asSent: readonly string[]): Promise<void> {
    const wanted = endpoint.tagIds ?? [];
    const written = new Set(await store.webhooks.replaceEndpointTags(endpoint.organizationId, endpoint.id, wanted));
    const issues: FieldIssue[] = asSent.flatMap((id, index) =>
      written.has(id)
        ? []
        : [{ path: ["tagIds", index], code: "UNKNOWN_TAG", message: `no tag with id ${id} in this organization` }],
    );
    if (issues.length > 0) throw validationFailed(issues);
  }

  private async lockEndpointIn(store: Store, organizationId: string, id: string): Promise<WebhookEndpoint> {
    const endpoint = isUuid(id) ? await store.webhooks.lockEndpoint(organizationId, id.toLowerCase()) : null;
    if (!endpoint) throw notFound("webhook endpoint");
    return endpoint;
  }

  private async getEndpointIn(store: Store, organizationId: string, id: string): Promise<WebhookEndpoint> {
    const endpoint = isUuid(id) ? await store.webhooks.findEndpoint(organizationId, id.toLowerCase()) : null;
    if (!endpoint) throw notFound("webhook endpoint");
    return endpoint;
  }

  private page<T extends { readonly id: string }>(
    rows: readonly T[],
    limit: number,
    filters: object,
    hasPrevious: boolean,
  ): Page<T> {
    return pageOf(rows, limit, (item) => this.cursors.encode<IdPosition>({ i: item.id }, filters), hasPrevious);
  }
}
