import type { ReferenceUpdate, TaggedReference } from "../../domain/models.ts";
import { fromJson, toBoolean, toDate, toNullableDate } from "./rows.ts";
import { Prisma } from "./sql-template.ts";
import { tagsFromList } from "./tag-lists.ts";

/*
 * How a reference and a reference update are read from their rows: the column lists and the mappers, shared by the
 * reference repository and the lifecycle repository (which reads an event's reference with it).
 */

/**
 * The columns a reference is read with, in this order: rows come back as arrays of these values (the driver's
 * types, read by rows.ts), mapped by position in `taggedReferenceFromValues`.
 */
const REFERENCE_COLUMN_NAMES = [
  "id",
  "organization_id",
  "container_id",
  "bill_of_lading",
  "booking_number",
  "carrier_code",
  "parent_reference_id",
  "active",
  "deactivate_reason",
  "auto_unsubscribed",
  "last_update_status",
  "consecutive_failures",
  "estimated_departure",
  "estimated_arrival",
  "created_at",
  "updated_at",
  /** JSON array of the reference's tags, in name order (src/store/sql/tag-lists.ts). */
  "tag_list",
] as const;

export const REFERENCE_COLUMNS = Prisma.raw(REFERENCE_COLUMN_NAMES.map((column) => `r."${column}"`).join(", "));

/** How many values a reference is read with (REFERENCE_COLUMN_NAMES). */
export const REFERENCE_COLUMN_COUNT = REFERENCE_COLUMN_NAMES.length;

/** A reference read as REFERENCE_COLUMN_NAMES' values. */
export function taggedReferenceFromValues(row: unknown[]): TaggedReference {
  const organizationId = row[1] as string;
  return {
    id: row[0] as string,
    organizationId,
    containerId: row[2] as string | null,
    billOfLading: row[3] as string | null,
    bookingNumber: row[4] as string | null,
    carrierCode: row[5] as string,
    parentReferenceId: row[6] as string | null,
    active: toBoolean(row[7]),
    deactivateReason: row[8] as string | null,
    autoUnsubscribed: toBoolean(row[9]),
    lastUpdateStatus: row[10] as string | null,
    consecutiveFailures: Number(row[11]),
    estimatedDeparture: toNullableDate(row[12]),
    estimatedArrival: toNullableDate(row[13]),
    createdAt: toDate(row[14]),
    updatedAt: toDate(row[15]),
    tags: tagsFromList(row[16], organizationId),
  };
}

export const REFERENCE_UPDATE_COLUMNS = Prisma.raw(`"id", "organization_id", "reference_id", "document", "created_at"`);

/** A reference_updates row as a raw statement reads it (the driver's types, see src/store/sql/rows.ts). */
export interface ReferenceUpdateRow {
  readonly id: string;
  readonly organization_id: string;
  readonly reference_id: string;
  readonly document: unknown;
  readonly created_at: unknown;
}

export function referenceUpdateFromRow(row: ReferenceUpdateRow): ReferenceUpdate {
  return {
    id: row.id,
    organizationId: row.organization_id,
    referenceId: row.reference_id,
    document: fromJson(row.document) as Record<string, unknown>,
    createdAt: toDate(row.created_at),
  };
}
