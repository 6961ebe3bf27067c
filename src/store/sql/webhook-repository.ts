import type {
  DroppedReason,
  EndpointRoute,
  WebhookAttempt,
  WebhookDelivery,
  WebhookDeliveryView,
  WebhookEndpoint,
} from "../../domain/webhooks/webhook-models.ts";
import type {
  ClaimRequest,
  CountedLostAttempts,
  DeliveryLease,
  DeliveryListQuery,
  FinishedAttempt,
  LeasedDelivery,
  WebhookRepository,
} from "../../domain/webhooks/webhook-repository.ts";
import type { DatabaseProvider } from "../database.ts";
import type { SecretCipher } from "../secret-cipher.ts";
import type { SqlExecutor } from "./executor.ts";
import type { EndpointChange } from "./endpoint-start-gate.ts";
import { SqlWebhookClaimRepository } from "./webhook-claim-repository.ts";
import { SqlWebhookDeliveryRepository } from "./webhook-delivery-repository.ts";
import { SqlWebhookEndpointRepository } from "./webhook-endpoint-repository.ts";

/*
 * The domain's webhook repository, in raw SQL, in three parts by what they serve: the endpoints and their tag
 * filters (webhook-endpoint-repository.ts), the outbox as the API and retention see it
 * (webhook-delivery-repository.ts), and the worker's claims and leases (webhook-claim-repository.ts). All three
 * run every statement on the one executor given here: the driver, or the transaction of the unit of work that
 * built this repository (`store.transaction(...)`), so that methods changing several rows run in the caller's
 * transaction.
 */

export class SqlWebhookRepository implements WebhookRepository {
  private readonly endpoints: SqlWebhookEndpointRepository;
  private readonly deliveries: SqlWebhookDeliveryRepository;
  private readonly claims: SqlWebhookClaimRepository;

  constructor(
    provider: DatabaseProvider,
    /** Runs every statement: the driver, or the transaction of the unit of work that built this repository. */
    sql: SqlExecutor,
    /** Encrypts signing secrets on the way in, decrypts them on the way out: the domain sees plain secrets. */
    secrets: SecretCipher,
    /** Told how many deliveries each insert queues (the unit of work counts its outbox rows). */
    private readonly onDeliveriesQueued?: (count: number) => void,
    /** Told which endpoints a statement changed or deleted (the unit of work tells them on at its commit). */
    onEndpointsChanged?: (changes: readonly EndpointChange[]) => void,
  ) {
    this.endpoints = new SqlWebhookEndpointRepository(provider, sql, secrets, onEndpointsChanged);
    this.deliveries = new SqlWebhookDeliveryRepository(provider, sql);
    this.claims = new SqlWebhookClaimRepository(provider, sql);
  }

  insertEndpoint(endpoint: WebhookEndpoint): Promise<void> {
    return this.endpoints.insertEndpoint(endpoint);
  }
  replaceEndpointTags(organizationId: string, endpointId: string, tagIds: readonly string[]): Promise<string[]> {
    return this.endpoints.replaceEndpointTags(organizationId, endpointId, tagIds);
  }
  findEndpoint(organizationId: string, id: string): Promise<WebhookEndpoint | null> {
    return this.endpoints.findEndpoint(organizationId, id);
  }
  lockEndpoint(organizationId: string, id: string): Promise<WebhookEndpoint | null> {
    return this.endpoints.lockEndpoint(organizationId, id);
  }
  findEndpointsByIds(ids: readonly string[]): Promise<WebhookEndpoint[]> {
    return this.endpoints.findEndpointsByIds(ids);
  }
  findEnabledEndpoints(organizationId: string): Promise<EndpointRoute[]> {
    return this.endpoints.findEnabledEndpoints(organizationId);
  }
  countEndpoints(organizationId: string): Promise<number> {
    return this.endpoints.countEndpoints(organizationId);
  }
  listEndpoints(organizationId: string, beforeId: string | undefined, limit: number): Promise<WebhookEndpoint[]> {
    return this.endpoints.listEndpoints(organizationId, beforeId, limit);
  }
  updateEndpoint(endpoint: WebhookEndpoint): Promise<void> {
    return this.endpoints.updateEndpoint(endpoint);
  }
  deleteEndpoint(organizationId: string, id: string): Promise<boolean> {
    return this.endpoints.deleteEndpoint(organizationId, id);
  }
  markEndpointsFailing(since: ReadonlyMap<string, Date>): Promise<void> {
    return this.endpoints.markEndpointsFailing(since);
  }
  markEndpointsHealthy(ids: readonly string[]): Promise<void> {
    return this.endpoints.markEndpointsHealthy(ids);
  }
  disableEndpoints(ids: readonly string[], reason: string, at: Date, failingSinceAtOrBefore?: Date): Promise<string[]> {
    return this.endpoints.disableEndpoints(ids, reason, at, failingSinceAtOrBefore);
  }

  insertDeliveries(deliveries: readonly WebhookDelivery[]): Promise<void> {
    if (deliveries.length > 0) this.onDeliveriesQueued?.(deliveries.length);
    return this.deliveries.insertDeliveries(deliveries);
  }
  findDelivery(organizationId: string, id: string): Promise<WebhookDeliveryView | null> {
    return this.deliveries.findDelivery(organizationId, id);
  }
  findDeliveriesByIds(organizationId: string, ids: readonly string[]): Promise<WebhookDeliveryView[]> {
    return this.deliveries.findDeliveriesByIds(organizationId, ids);
  }
  findAttemptsByIds(organizationId: string, ids: readonly string[]): Promise<WebhookAttempt[]> {
    return this.deliveries.findAttemptsByIds(organizationId, ids);
  }
  listDeliveries(query: DeliveryListQuery): Promise<WebhookDeliveryView[]> {
    return this.deliveries.listDeliveries(query);
  }
  findAttemptsByDeliveryIds(deliveryIds: readonly string[]): Promise<Map<string, WebhookAttempt[]>> {
    return this.deliveries.findAttemptsByDeliveryIds(deliveryIds);
  }
  requeueDelivery(id: string, at: Date): Promise<WebhookDelivery | null> {
    return this.deliveries.requeueDelivery(id, at);
  }
  deleteSucceededDeliveriesBefore(cutoff: Date, batchSize: number): Promise<number> {
    return this.deliveries.deleteSucceededDeliveriesBefore(cutoff, batchSize);
  }
  countPendingDeliveries(): Promise<number> {
    return this.deliveries.countPendingDeliveries();
  }

  claimDueDeliveries(request: ClaimRequest): Promise<LeasedDelivery[]> {
    return this.claims.claimDueDeliveries(request);
  }
  finishAttempts(items: readonly FinishedAttempt[]): Promise<Set<string>> {
    return this.claims.finishAttempts(items);
  }
  countLostAttempts(items: readonly CountedLostAttempts[]): Promise<void> {
    return this.claims.countLostAttempts(items);
  }
  abandonDelivery(lease: DeliveryLease, at: Date, reason: DroppedReason): Promise<void> {
    return this.claims.abandonDelivery(lease, at, reason);
  }
  failPendingDeliveries(endpointIds: string | readonly string[], at: Date): Promise<number> {
    return this.claims.failPendingDeliveries(endpointIds, at);
  }
  releaseDeliveries(leases: readonly DeliveryLease[], attemptMade: boolean): Promise<void> {
    return this.claims.releaseDeliveries(leases, attemptMade);
  }
}
