-- A replay's remaining window, so that a replay outlives the process that took the call: the cursor (the last
-- event scheduled) and how many events are left, leased by the instance scheduling it; any instance resumes a
-- replay whose lease is free or expired. The key is the endpoint: one replay at a time per endpoint.

CREATE TABLE "webhook_replays" (
    "endpoint_id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "since" TIMESTAMP(3) NOT NULL,
    "until" TIMESTAMP(3) NOT NULL,
    "remaining" INTEGER NOT NULL,
    "after_occurred_at" TIMESTAMP(3),
    "after_event_id" TEXT,
    "lease_owner" TEXT,
    "lease_expires_at" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "webhook_replays_pkey" PRIMARY KEY ("endpoint_id")
);

ALTER TABLE "webhook_replays" ADD CONSTRAINT "webhook_replays_endpoint_id_fkey" FOREIGN KEY ("endpoint_id") REFERENCES "webhook_endpoints"("id") ON DELETE CASCADE ON UPDATE CASCADE;
