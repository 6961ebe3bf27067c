import type { AuditLogService } from "./audit/audit-log-service.ts";
import type { ApiKeyService } from "./organizations/api-key-service.ts";
import type { CostBudgetService } from "./budgets/cost-budget-service.ts";
import type { TrustedDocumentService } from "./documents/trusted-document-service.ts";
import type { LifecycleLogService } from "./lifecycle/lifecycle-log-service.ts";
import type { EventFeedService } from "./live/event-feed-service.ts";
import type { NodeService } from "./nodes/node-service.ts";
import type { OrganizationService } from "./organizations/organization-service.ts";
import type { IngestionService } from "./references/ingestion-service.ts";
import type { ReferenceService } from "./references/reference-service.ts";
import type { ReferenceTrackingService } from "./references/reference-tracking-service.ts";
import type { TagService } from "./tags/tag-service.ts";
import type { Store } from "./store.ts";
import type { WebhookDeliveryService } from "./webhooks/webhook-delivery-service.ts";
import type { WebhookRecoveryService } from "./webhooks/webhook-recovery-service.ts";
import type { WebhookService } from "./webhooks/webhook-service.ts";

/** Everything the adapters (REST, GraphQL, CLI, workers) may call. Built once in `app.ts`. */
export interface Services {
  readonly organizations: OrganizationService;
  /** API keys as their organization manages them (create with scopes, list, read, revoke). */
  readonly apiKeys: ApiKeyService;
  /** The organizations' administrative changes: recorded by the services that make them, listed newest first. */
  readonly audit: AuditLogService;
  /** The registry of trusted documents: GraphQL documents an organization's clients may name by id. */
  readonly trustedDocuments: TrustedDocumentService;
  readonly tags: TagService;
  readonly references: ReferenceService;
  /** What the tracking side reports about a reference: extractions, updates, deactivation, reactivation. */
  readonly referenceTracking: ReferenceTrackingService;
  /** Bulk ingestion: many reports of the tracking side in one request. */
  readonly ingestion: IngestionService;
  readonly lifecycleLog: LifecycleLogService;
  /** The organization's whole log in live order, to poll (with a long poll once the server attaches the live feed). */
  readonly eventFeed: EventFeedService;
  /** Any object by its id alone (global object identification). */
  readonly nodes: NodeService;
  /**
   * Commits of lifecycle events, told by the unit of work itself (wakes live subscriptions and the webhook
   * worker), and units of work run again after losing a race (metrics).
   */
  readonly commits: Pick<Store, "onEventsCommitted" | "onContendedUnit">;
  /** Webhook endpoints and deliveries as the organization manages them. */
  readonly webhooks: WebhookService;
  /** The delivery rules the webhook worker applies. */
  readonly webhookDeliveries: WebhookDeliveryService;
  /** Recovery and replay of an endpoint's deliveries over a time window, and what an ordered endpoint holds back. */
  readonly webhookRecovery: WebhookRecoveryService;
  /** Each API key's cost budget, drawn by GraphQL and REST requests. */
  readonly budgets: CostBudgetService;
}
