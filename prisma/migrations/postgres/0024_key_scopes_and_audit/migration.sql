-- Keys with scopes, managed by the organization, and an audit log (SPEC §3.1, docs/decisions/0130-key-scopes.md).
-- scopes is the key's scopes separated by single spaces. Keys that existed before scopes hold every scope.
ALTER TABLE "api_keys" ADD COLUMN "name" TEXT NOT NULL DEFAULT '';
ALTER TABLE "api_keys" ADD COLUMN "scopes" TEXT NOT NULL DEFAULT 'references:read references:write webhooks:read webhooks:write documents:read documents:write keys:read keys:write audit:read';
ALTER TABLE "api_keys" ADD COLUMN "expires_at" TIMESTAMP(3);
-- Written at most once a minute per key (never once per request): see OrganizationService.noteKeyUse.
ALTER TABLE "api_keys" ADD COLUMN "last_used_at" TIMESTAMP(3);

-- One row per administrative change, written in the transaction of the change. actor_api_key_id is NULL for a
-- change made by the operator's CLI; changes is a JSON object { field: { from, to } } with URLs masked and never a
-- secret or a key.
CREATE TABLE "audit_events" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "occurred_at" TIMESTAMP(3) NOT NULL,
    "action" TEXT NOT NULL,
    "actor_api_key_id" TEXT,
    "actor_key_prefix" TEXT,
    "target_type" TEXT NOT NULL,
    "target_id" TEXT NOT NULL,
    "changes" TEXT NOT NULL,
    "request_id" TEXT,

    CONSTRAINT "audit_events_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "audit_events_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
-- The listing, newest first (ids are UUIDv7, so id order is creation order), and its filters.
CREATE INDEX "audit_events_organization_id_id_idx" ON "audit_events"("organization_id", "id");
CREATE INDEX "audit_events_occurred_at_idx" ON "audit_events"("occurred_at");
