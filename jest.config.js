// Jest runs the TypeScript sources as native ES modules (Node's --experimental-vm-modules, set by `npm test`):
// @swc/jest strips the types and keeps `import`/`export`, so `.ts` import specifiers, `import.meta` and Prisma's
// generated ESM clients load as they are. Why this transform: docs/decisions.md, "Tests run on jest".

/** @type {import("jest").Config} */
export default {
  // Node, with hooks allowed 120 s (see the file).
  testEnvironment: "<rootDir>/test/support/node-environment.js",
  roots: ["<rootDir>/src", "<rootDir>/test"],
  testMatch: ["<rootDir>/test/**/*.test.ts", "<rootDir>/src/**/*.test.ts"],
  extensionsToTreatAsEsm: [".ts"],
  transform: {
    "^.+\\.ts$": [
      "@swc/jest",
      {
        jsc: { parser: { syntax: "typescript" }, target: "es2023" },
        module: { type: "es6" },
        sourceMaps: "inline",
      },
    ],
  },
  // Each file starts its own servers on fresh databases; two cores run two files at a time.
  maxWorkers: 2,
  testTimeout: 60_000,
};
