/*
 * The peer of `npm run bench` (part `peer`, bench/peer.bench.ts): PostGraphile 4 in library mode on node:http,
 * over the bench's PostgreSQL database, with postgraphile-plugin-connection-filter (relation filters on) for the
 * two-tag page. Production settings: no GraphiQL, no query log, no schema watching, no mutations (the bench
 * only reads). lifecycle_events has no foreign key to its reference in reftrail's schema; a smart tag declares
 * one here (nothing in the database changes), so that a reference lists its events.
 *
 *   node bench/postgraphile/server.mjs <database url> [--print-schema]
 *
 * Tells its parent `{ port }` over the IPC channel once listening; exits on the message "stop".
 */
import { createServer } from "node:http";
import { printSchema } from "graphql";
import graphileUtils from "graphile-utils";
import postgraphilePackage from "postgraphile";
import connectionFilter from "postgraphile-plugin-connection-filter";

// CommonJS packages: their exports are properties of the default import.
const { createPostGraphileSchema, postgraphile } = postgraphilePackage;
const { makeJSONPgSmartTagsPlugin } = graphileUtils;
const ConnectionFilterPlugin = connectionFilter.default ?? connectionFilter;

const [databaseUrl, flag] = process.argv.slice(2);
if (!databaseUrl) throw new Error("usage: server.mjs <database url> [--print-schema]");

const EventsOfReference = makeJSONPgSmartTagsPlugin({
  version: 1,
  config: {
    class: {
      lifecycle_events: { tags: { foreignKey: "(reference_id) references shipping_references (id)" } },
    },
  },
});

const options = {
  appendPlugins: [EventsOfReference, ConnectionFilterPlugin],
  graphileBuildOptions: { connectionFilterRelations: true },
  disableDefaultMutations: true,
  dynamicJson: true,
  setofFunctionsContainNulls: false,
  ignoreRBAC: false,
  watchPg: false,
  graphiql: false,
  enableQueryBatching: false,
  disableQueryLog: true,
  retryOnInitFail: false,
  extendedErrors: [],
  showErrorStack: false,
};

if (flag === "--print-schema") {
  const schema = await createPostGraphileSchema(databaseUrl, "public", options);
  process.stdout.write(printSchema(schema));
  process.exit(0);
}

const server = createServer(postgraphile(databaseUrl, "public", options));
server.listen(0, "127.0.0.1", () => process.send?.({ port: server.address().port }));
process.on("message", (message) => {
  if (message === "stop") server.close(() => process.exit(0));
});
