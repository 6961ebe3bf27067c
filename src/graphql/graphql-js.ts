/**
 * graphql-js, always as its CommonJS build. graphql 16 ships two builds: CommonJS (`main`) and ESM
 * (`module`, `.mjs`). Node loads the CommonJS one for every package (Apollo, graphql-tools, graphql-scalars,
 * graphql-query-complexity), but Vite-based runners such as vitest resolve `module` for our own source files.
 * Two copies in one process break graphql-js's `instanceof` checks ("Cannot use GraphQLSchema ... from
 * another module or realm"), so our code takes graphql-js's runtime values from here, by explicit path.
 * Type-only imports may name "graphql" directly.
 */
export * from "graphql/index.js";
