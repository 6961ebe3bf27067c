// Lint rules that keep the architecture honest: adapters -> domain <- store, no floating promises, type-only
// imports marked as such.
import importX, { createNodeResolver } from "eslint-plugin-import-x";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/**", "src/**/__generated__/**", "data/**", "bench/results*"] },
  {
    files: ["src/**/*.ts", "test/**/*.ts", "bench/**/*.ts"],
    extends: [tseslint.configs.base],
    plugins: { "import-x": importX },
    settings: { "import-x/resolver-next": [createNodeResolver({ extensions: [".ts", ".js", ".mjs"] })] },
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
      "no-restricted-syntax": ["error", { selector: "ExportDefaultDeclaration", message: "Use named exports." }],
      "import-x/no-cycle": "error",
      "import-x/no-restricted-paths": [
        "error",
        {
          zones: [
            {
              target: "./src/domain",
              from: ["./src/store", "./src/rest", "./src/graphql", "./src/webhooks", "./src/cli", "./src/app.ts"],
              message: "The domain depends on nothing outside it; the store and adapters depend on the domain.",
            },
            {
              target: ["./src/rest", "./src/graphql"],
              from: "./src/store",
              message: "Adapters call domain services; only the composition root (app.ts) wires the store.",
            },
          ],
        },
      ],
    },
  },
);
