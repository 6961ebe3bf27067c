import { request } from "undici";
import pg from "pg";
import { startServerProcess } from "../test/support/server-process.ts";
const url = process.argv[2]!;
const c = new pg.Client({ connectionString: url }); await c.connect();
const org = (await c.query(`select organization_id from lifecycle_commits group by 1 order by count(*) desc limit 1`)).rows[0].organization_id;
await c.end();
const server = await startServerProcess({ DATABASE_URL: url, NODE_ENV: "production", LOG_LEVEL: "info", WEBHOOK_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
// make a key with the CLI-free route: use services
const { buildServices } = await import("../src/build-services.ts");
const { loadConfig } = await import("../src/config.ts");
const { openDatabase } = await import("../src/store/database.ts");
const { TEST_WEBHOOK_SECRET_KEY } = await import("../test/support/test-server.ts");
const db = await openDatabase(url);
const services = buildServices(loadConfig({ NODE_ENV: "test", DATABASE_URL: url, WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY }), db);
const key = (await services.organizations.createApiKey(org, {})).key;
await db.close();
for (const path of (process.argv[3] ?? "/v1/events?limit=1&tag_names=rare,/v1/events?limit=100").split(",")) {
  for (let i = 0; i < 4; i++) { const t = performance.now(); const r = await request(server.url + path, { headers: { authorization: `Bearer ${key}`, "cache-control": "no-cache" } }); await r.body.text(); console.log(path, r.statusCode, (performance.now() - t).toFixed(1), "ms"); }
}
server.child.kill("SIGTERM"); await server.exited();
