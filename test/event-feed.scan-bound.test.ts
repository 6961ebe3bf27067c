import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { EventFeedService } from "../src/domain/live/event-feed-service.ts";
import { StreamCursors } from "../src/domain/live/stream-cursor.ts";
import { CursorCodec } from "../src/domain/shared/cursor.ts";
import { SecretCipher } from "../src/store/secret-cipher.ts";
import { SqlLiveLogStore } from "../src/store/sql/live-log-store.ts";
import { SqlStore } from "../src/store/sql/sql-store.ts";
import { DATABASE_KINDS, startTestServices, type TestServices } from "./support/test-server.ts";

/*
 * A poll with tag filters reads the log in statements of a bounded number of rows and stops after a bounded
 * number (500 and 5,000 in the server; 4 and 10 here): a filter that matches little answers with what it found,
 * `hasMore`, and a cursor past the rows it read, so that following the cursors still gives every event once.
 */

describe.each(DATABASE_KINDS)("the feed's scan bound on %s", (kind) => {
  let started: TestServices;
  let feed: EventFeedService;

  beforeAll(async () => {
    started = await startTestServices(kind);
    const log = new SqlLiveLogStore(started.database);
    feed = new EventFeedService(
      new SqlStore(started.database, new SecretCipher(randomBytes(32))),
      log,
      new StreamCursors(new CursorCodec("test"), log),
      () => new Date(0),
      { maxWaitingPollsPerOrganization: 1, scan: { batchSize: 4, maxRows: 10 } },
    );
  });

  afterAll(async () => {
    await started?.close();
  });

  it("answers a narrow filter with what it found and a cursor past what it read, then the rest", async () => {
    const { services } = started;
    const { organization } = await services.organizations.createOrganization("scan-bound");
    const plain = await services.references.createReference(organization.id, {
      bookingNumber: "BK-P",
      carrierCode: "MAEU",
    });
    for (let i = 0; i < 30; i++)
      await services.referenceTracking.recordExtraction(organization.id, plain.id, { status: "succeeded" });
    const tagged = await services.references.createReference(organization.id, {
      bookingNumber: "BK-T",
      carrierCode: "MAEU",
      tags: [{ name: "rare" }],
    });
    await services.referenceTracking.recordExtraction(organization.id, tagged.id, { status: "succeeded" });

    const first = await feed.readPage(organization.id, { tagNames: ["rare"], limit: 5 });
    expect([first.events.length, first.hasMore]).toEqual([0, true]);
    const pages = [first];
    while (pages.at(-1)!.hasMore) {
      pages.push(
        await feed.readPage(organization.id, { tagNames: ["rare"], limit: 5, after: pages.at(-1)!.nextCursor }),
      );
    }
    expect(pages.flatMap((page) => page.events.map((event) => [event.type, event.referenceId]))).toEqual([
      ["reference_created", tagged.id],
      ["extraction_succeeded", tagged.id],
    ]);
    // 31 rows of the other reference first, read 10 (in 3 statements of 4) per poll at most.
    expect(pages.length).toBeGreaterThanOrEqual(4);
  });
});
