// Lint: typescript-eslint's type-aware recommended rules over the source, tests, benchmarks and scripts.
// `npm run lint` runs it with --max-warnings 0, as CI does. No layout rules here: layout is Prettier's (`npm run format`),
// and the two never disagree (CI runs both; none of these rule sets carries a stylistic rule).
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    ignores: ["dist/**", "node_modules/**", "coverage/**", ".tap/**", "data/**", "public/**", "**/*.cjs", "src/db/pglite-worker.js"],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // Fastify plugins and route handlers are async by contract (an async function is how a plugin says it
      // is done), whether or not they await anything.
      "@typescript-eslint/require-await": "off",
      "@typescript-eslint/no-floating-promises": [
        "error",
        // tap runs the subtests a file declares without the file awaiting them.
        { allowForKnownSafePromises: [{ from: "package", name: "PromiseWithSubtest", package: "@tapjs/core" }] },
      ],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", destructuredArrayIgnorePattern: "^_" }],
    },
  },
  {
    // Tests read JSON bodies, whose type is whatever the server sent: `any` is the honest type there.
    files: ["test/**/*.ts", "bench/**/*.ts"],
    rules: {
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-return": "off",
      "@typescript-eslint/no-explicit-any": "off",
    },
  },
  { files: ["**/*.js", "**/*.mjs"], ...tseslint.configs.disableTypeChecked },
);
