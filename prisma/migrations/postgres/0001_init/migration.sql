-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "public";

-- CreateTable
CREATE TABLE "organizations" (
    "id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "organizations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "api_keys" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "key_hash" TEXT NOT NULL,
    "key_prefix" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL,
    "revoked_at" TIMESTAMP(3),

    CONSTRAINT "api_keys_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "tags" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "name_key" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "tags_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "shipping_references" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "container_id" TEXT,
    "bill_of_lading" TEXT,
    "booking_number" TEXT,
    "carrier_code" TEXT NOT NULL,
    "parent_reference_id" TEXT,
    "active" BOOLEAN NOT NULL,
    "deactivate_reason" TEXT,
    "auto_unsubscribed" BOOLEAN NOT NULL,
    "last_update_status" TEXT,
    "consecutive_failures" INTEGER NOT NULL,
    "estimated_departure" TIMESTAMP(3),
    "estimated_arrival" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "shipping_references_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "reference_tags" (
    "reference_id" TEXT NOT NULL,
    "tag_id" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "reference_tags_pkey" PRIMARY KEY ("reference_id","tag_id")
);

-- CreateTable
CREATE TABLE "lifecycle_events" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "reference_id" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "occurred_at" TIMESTAMP(3) NOT NULL,
    "detail" JSONB NOT NULL,
    "reference_tags" JSONB NOT NULL,

    CONSTRAINT "lifecycle_events_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "reference_updates" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "reference_id" TEXT NOT NULL,
    "document" JSONB NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "reference_updates_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "idempotency_records" (
    "organization_id" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "request_hash" TEXT NOT NULL,
    "status_code" INTEGER,
    "response_body" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "idempotency_records_pkey" PRIMARY KEY ("organization_id","key")
);

-- CreateTable
CREATE TABLE "webhook_endpoints" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "url" TEXT NOT NULL,
    "event_types" JSONB,
    "description" TEXT,
    "enabled" BOOLEAN NOT NULL,
    "disabled_reason" TEXT,
    "secret" TEXT NOT NULL,
    "previous_secret" TEXT,
    "previous_secret_expires_at" TIMESTAMP(3),
    "failing_since" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "webhook_endpoints_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "webhook_deliveries" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "endpoint_id" TEXT NOT NULL,
    "event_id" TEXT NOT NULL,
    "event_type" TEXT NOT NULL,
    "body" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "attempt_count" INTEGER NOT NULL,
    "next_attempt_at" TIMESTAMP(3),
    "lease_owner" TEXT,
    "lease_expires_at" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "webhook_deliveries_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "webhook_attempts" (
    "id" TEXT NOT NULL,
    "delivery_id" TEXT NOT NULL,
    "attempted_at" TIMESTAMP(3) NOT NULL,
    "status_code" INTEGER,
    "error" TEXT,
    "latency_ms" INTEGER NOT NULL,
    "response_body" TEXT,

    CONSTRAINT "webhook_attempts_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "api_keys_key_hash_key" ON "api_keys"("key_hash");

-- CreateIndex
CREATE INDEX "api_keys_organization_id_idx" ON "api_keys"("organization_id");

-- CreateIndex
CREATE UNIQUE INDEX "tags_organization_id_name_key_key" ON "tags"("organization_id", "name_key");

-- CreateIndex
CREATE INDEX "shipping_references_organization_id_id_idx" ON "shipping_references"("organization_id", "id");

-- CreateIndex
CREATE INDEX "shipping_references_organization_id_active_id_idx" ON "shipping_references"("organization_id", "active", "id");

-- CreateIndex
CREATE INDEX "shipping_references_organization_id_carrier_code_id_idx" ON "shipping_references"("organization_id", "carrier_code", "id");

-- CreateIndex
CREATE INDEX "shipping_references_organization_id_container_id_idx" ON "shipping_references"("organization_id", "container_id");

-- CreateIndex
CREATE INDEX "shipping_references_organization_id_bill_of_lading_idx" ON "shipping_references"("organization_id", "bill_of_lading");

-- CreateIndex
CREATE INDEX "shipping_references_organization_id_booking_number_idx" ON "shipping_references"("organization_id", "booking_number");

-- CreateIndex
CREATE INDEX "shipping_references_parent_reference_id_container_id_idx" ON "shipping_references"("parent_reference_id", "container_id");

-- CreateIndex
CREATE INDEX "reference_tags_tag_id_reference_id_idx" ON "reference_tags"("tag_id", "reference_id");

-- CreateIndex
CREATE INDEX "lifecycle_events_reference_id_occurred_at_id_idx" ON "lifecycle_events"("reference_id", "occurred_at", "id");

-- CreateIndex
CREATE INDEX "lifecycle_events_organization_id_occurred_at_id_idx" ON "lifecycle_events"("organization_id", "occurred_at", "id");

-- CreateIndex
CREATE INDEX "lifecycle_events_occurred_at_idx" ON "lifecycle_events"("occurred_at");

-- CreateIndex
CREATE INDEX "reference_updates_reference_id_id_idx" ON "reference_updates"("reference_id", "id");

-- CreateIndex
CREATE INDEX "idempotency_records_created_at_idx" ON "idempotency_records"("created_at");

-- CreateIndex
CREATE INDEX "webhook_endpoints_organization_id_id_idx" ON "webhook_endpoints"("organization_id", "id");

-- CreateIndex
CREATE INDEX "webhook_deliveries_status_next_attempt_at_idx" ON "webhook_deliveries"("status", "next_attempt_at");

-- CreateIndex
CREATE INDEX "webhook_deliveries_endpoint_id_id_idx" ON "webhook_deliveries"("endpoint_id", "id");

-- CreateIndex
CREATE INDEX "webhook_attempts_delivery_id_attempted_at_idx" ON "webhook_attempts"("delivery_id", "attempted_at");

-- AddForeignKey
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "shipping_references" ADD CONSTRAINT "shipping_references_parent_reference_id_fkey" FOREIGN KEY ("parent_reference_id") REFERENCES "shipping_references"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "reference_tags" ADD CONSTRAINT "reference_tags_reference_id_fkey" FOREIGN KEY ("reference_id") REFERENCES "shipping_references"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "reference_tags" ADD CONSTRAINT "reference_tags_tag_id_fkey" FOREIGN KEY ("tag_id") REFERENCES "tags"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "webhook_attempts" ADD CONSTRAINT "webhook_attempts_delivery_id_fkey" FOREIGN KEY ("delivery_id") REFERENCES "webhook_deliveries"("id") ON DELETE CASCADE ON UPDATE CASCADE;

