-- Webhooks routed by tag: an endpoint with tag_filtered = true receives only events whose reference carried
-- one of its tags (webhook_endpoint_tags) when the event was written. Deleting a tag deletes its rows here
-- (ON DELETE CASCADE); an endpoint left with tag_filtered = true and no rows receives nothing.

-- AlterTable
ALTER TABLE "webhook_endpoints" ADD COLUMN "tag_filtered" BOOLEAN NOT NULL DEFAULT false;

-- CreateTable
CREATE TABLE "webhook_endpoint_tags" (
    "endpoint_id" TEXT NOT NULL,
    "tag_id" TEXT NOT NULL,

    PRIMARY KEY ("endpoint_id", "tag_id"),
    CONSTRAINT "webhook_endpoint_tags_endpoint_id_fkey" FOREIGN KEY ("endpoint_id") REFERENCES "webhook_endpoints" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "webhook_endpoint_tags_tag_id_fkey" FOREIGN KEY ("tag_id") REFERENCES "tags" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateIndex
CREATE INDEX "webhook_endpoint_tags_tag_id_idx" ON "webhook_endpoint_tags"("tag_id");
