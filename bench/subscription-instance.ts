/*
 * A second reftrail instance for subscriptions.bench.ts, in its own process (so the two instances do not share
 * one event loop), on the same PostgreSQL database. It serves its share of the subscriptions and writes its share
 * of the burst through its own services, recording when each event's transaction committed (epoch milliseconds,
 * comparable with the parent's clock on one machine).
 *
 * Messages from the parent: { type: "start", config } then { type: "write", organizationId, referenceIds,
 * writers } and { type: "stop" }. Messages to the parent: { type: "started", base },
 * { type: "written", committed: [[eventId, at], ...] }, { type: "stopped" }.
 */
import { buildApp, type App } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { openDatabase } from "../src/store/database.ts";
import { writeBurst } from "./subscription-burst.ts";

let app: App | undefined;
const send = (message: object) => process.send?.(message);

process.on("message", (message: { type: string; [key: string]: any }) => {
  void handle(message).catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
});

async function handle(message: { type: string; [key: string]: any }): Promise<void> {
  if (message.type === "start") {
    const config = loadConfig(message.env as Record<string, string>);
    app = await buildApp({ config, database: await openDatabase(config.databaseUrl) });
    await app.http.listen({ host: "127.0.0.1", port: 0 });
    const address = app.http.server.address();
    if (!address || typeof address === "string") throw new Error("server did not bind a TCP port");
    send({ type: "started", base: `http://127.0.0.1:${address.port}` });
  } else if (message.type === "write") {
    if (!app) throw new Error("write before start");
    const committed = await writeBurst(app.services, message.organizationId, message.referenceIds, message.writers);
    send({ type: "written", committed: [...committed] });
  } else if (message.type === "stop") {
    await app?.close();
    send({ type: "stopped" });
    process.exit(0);
  }
}
