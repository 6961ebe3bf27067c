import type { RouteGroup } from "../rest-api.ts";
import { registerApiKeyRoutes } from "./api-keys.routes.ts";
import { registerEventFeedRoutes } from "./event-feed.routes.ts";
import { registerEventTypeRoutes } from "./event-types.routes.ts";
import { registerIngestionRoutes } from "./ingestion.routes.ts";
import { registerLifecycleRoutes } from "./lifecycle.routes.ts";
import { registerReferenceTrackingRoutes } from "./reference-tracking.routes.ts";
import { registerReferenceRoutes } from "./references.routes.ts";
import { registerTagRoutes } from "./tags.routes.ts";
import { registerTrustedDocumentRoutes } from "./trusted-documents.routes.ts";
import { registerWebhookRecoveryRoutes } from "./webhook-recovery.routes.ts";
import { registerWebhookRoutes } from "./webhooks.routes.ts";

/** Every route group of the REST API under /v1, in the order the OpenAPI document lists them. */
export const REST_ROUTE_GROUPS: readonly RouteGroup[] = [
  registerTagRoutes,
  registerReferenceRoutes,
  registerReferenceTrackingRoutes,
  registerLifecycleRoutes,
  registerEventFeedRoutes,
  registerIngestionRoutes,
  registerWebhookRoutes,
  registerWebhookRecoveryRoutes,
  registerEventTypeRoutes,
  registerTrustedDocumentRoutes,
  registerApiKeyRoutes,
];
