/*
 * The data-path bench's organization: `references` references, each carrying exactly 2 of `tags` tags and
 * holding `eventsPerReference` lifecycle events (its `reference_created` first, then the other types in turn,
 * one second apart). Raw SQL in batches inside one transaction, secondary indexes rebuilt afterwards, rows in
 * Prisma's storage format (see bench/seed.ts, whose writers this reuses).
 */
import { v7 } from "uuid";
import { LIFECYCLE_EVENT_TYPES } from "../src/domain/lifecycle/lifecycle-event.ts";
import { tagNameKey } from "../src/domain/tags/tag-name.ts";
import {
  containerNumber,
  dbTime,
  EVENT_COLUMNS,
  eventDetails,
  openWriter,
  prng,
  REFERENCE_COLUMNS,
  tagListBackfill,
  referenceRow,
  type BulkWriter,
  type Kind,
} from "./seed.ts";

export interface DataSeedOptions {
  readonly kind: Kind;
  readonly url: string;
  readonly organizationId: string;
  readonly references: number;
  readonly tags: number;
  readonly eventsPerReference: number;
  /** Creation time of the newest reference (ms); the others are spread over the 30 days before it. */
  readonly newestAt: number;
}

export interface SeededData {
  readonly referenceIds: readonly string[];
  readonly tagNames: readonly string[];
  readonly referenceTagRows: number;
  readonly eventRows: number;
  readonly seconds: number;
}

const CARRIERS = ["MAEU", "MSCU", "CMDU", "HLCU", "ONEY", "EGLV", "COSU", "ZIMU"];
const TAG_COLUMNS = ["id", "organization_id", "name", "name_key", "created_at", "updated_at"];
const LINK_COLUMNS = ["reference_id", "tag_id", "created_at"];
/** References per batch; their events go in statements of at most ROWS_PER_STATEMENT rows. */
const REFERENCES_PER_BATCH = 500;
/** 1,000 rows of 7 columns stay under PostgreSQL's 65,535 bind parameters per statement. */
const ROWS_PER_STATEMENT = 1_000;

async function insertChunked(writer: BulkWriter, table: string, columns: readonly string[], rows: unknown[][]) {
  for (let start = 0; start < rows.length; start += ROWS_PER_STATEMENT) {
    await writer.insert(table, columns, rows.slice(start, start + ROWS_PER_STATEMENT));
  }
}

export async function seedDataPath(options: DataSeedOptions): Promise<SeededData> {
  const started = performance.now();
  const { kind, organizationId } = options;
  if (options.tags < 2) throw new Error("the data path bench needs at least 2 tags");
  const random = prng(20261124);
  const writer = await openWriter(kind, options.url, false);
  const spanMs = 30 * 86_400_000;
  const firstAt = options.newestAt - spanMs;
  const tags = Array.from({ length: options.tags }, (_, i) => {
    const name = `tag-${String(i).padStart(4, "0")}`;
    const at = firstAt - (options.tags - i) * 1_000;
    return { id: v7({ msecs: at }), name, at };
  });
  const referenceIds: string[] = [];
  const otherTypes = LIFECYCLE_EVENT_TYPES.filter((type) => type !== "reference_created");
  let referenceTagRows = 0;
  let eventRows = 0;
  try {
    await writer.begin();
    const recreate = await writer.dropSecondaryIndexes(["shipping_references", "reference_tags", "lifecycle_events"]);
    await insertChunked(
      writer,
      "tags",
      TAG_COLUMNS,
      tags.map((tag) => [
        tag.id,
        organizationId,
        tag.name,
        tagNameKey(tag.name),
        dbTime(kind, tag.at),
        dbTime(kind, tag.at),
      ]),
    );
    const step = options.references > 1 ? spanMs / (options.references - 1) : 0;
    let refRows: unknown[][] = [];
    let linkRows: unknown[][] = [];
    let eventBatch: unknown[][] = [];
    const flush = async () => {
      // References first: reference_tags has a foreign key to them.
      await insertChunked(writer, "shipping_references", REFERENCE_COLUMNS, refRows);
      await insertChunked(writer, "reference_tags", LINK_COLUMNS, linkRows);
      await insertChunked(writer, "lifecycle_events", EVENT_COLUMNS, eventBatch);
      referenceTagRows += linkRows.length;
      eventRows += eventBatch.length;
      refRows = [];
      linkRows = [];
      eventBatch = [];
    };
    for (let i = 0; i < options.references; i++) {
      const createdAtMs = Math.round(firstAt + i * step);
      const id = v7({ msecs: createdAtMs });
      const containerId = containerNumber("DAT", i);
      referenceIds.push(id);
      refRows.push(
        referenceRow(kind, organizationId, {
          id,
          containerId,
          carrierCode: CARRIERS[Math.floor(random() * CARRIERS.length)]!,
          createdAtMs,
        }),
      );
      const first = Math.floor(random() * options.tags);
      const second = (first + 1 + Math.floor(random() * (options.tags - 1))) % options.tags;
      const carried = [tags[first]!, tags[second]!].sort((a, b) => a.name.localeCompare(b.name));
      for (const tag of carried) linkRows.push([id, tag.id, dbTime(kind, createdAtMs)]);
      const snapshot = JSON.stringify(carried.map((tag) => ({ id: tag.id, name: tag.name })));
      const details = eventDetails(id, organizationId, containerId);
      for (let e = 0; e < options.eventsPerReference; e++) {
        const type = e === 0 ? "reference_created" : otherTypes[(e - 1) % otherTypes.length]!;
        const at = createdAtMs + e * 1_000;
        eventBatch.push([v7({ msecs: at }), organizationId, id, type, dbTime(kind, at), details.get(type)!, snapshot]);
      }
      if (refRows.length === REFERENCES_PER_BATCH) await flush();
    }
    await flush();
    // Seeded rows are written past the store: their tag lists are built the way migration 0009 builds them.
    await writer.exec(tagListBackfill(kind));
    await writer.runDeferredTriggers();
    for (const sql of recreate) await writer.exec(sql);
    await writer.commit();
    await writer.finish(["tags", "shipping_references", "reference_tags", "lifecycle_events"]);
  } finally {
    await writer.close();
  }
  return {
    referenceIds,
    tagNames: tags.map((tag) => tag.name),
    referenceTagRows,
    eventRows,
    seconds: (performance.now() - started) / 1_000,
  };
}
