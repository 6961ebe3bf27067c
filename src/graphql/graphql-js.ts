/**
 * graphql-js's runtime values, by explicit path to its CommonJS build. graphql 16 ships two builds, CommonJS
 * (`main`) and ESM (`module`, `.mjs`), and two copies in one process break graphql-js's `instanceof` checks
 * ("Cannot use GraphQLSchema ... from another module or realm"). Node and jest ignore `module` and load the
 * CommonJS build for every importer (our code, Apollo, graphql-tools, graphql-scalars,
 * graphql-query-complexity), so importing "graphql" directly is as safe; this file was needed while the tests
 * ran on vitest, whose Vite resolver picked `module` for our own sources. It stays as a harmless import point
 * so that code written against it keeps working.
 */
export * from "graphql/index.js";
