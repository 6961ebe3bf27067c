/*
 * Imported first by bench/run.ts and bench/server-process.ts (some parts run the server in the bench's own
 * process, the data and peer parts in a child process), because libraries read NODE_ENV when they load
 * (graphql-js picks a plain `instanceof` over its development check, which cost about 4 % of a GraphQL
 * request's CPU). A deployed server runs with NODE_ENV=production (README), so the bench does too,
 * Apollo hello world included.
 */
process.env.NODE_ENV = "production";
