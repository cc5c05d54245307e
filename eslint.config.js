import { readdirSync } from 'node:fs';
import path from 'node:path';
import js from '@eslint/js';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';
import { PROJECT_LAYERS, noUpwardImport } from './scripts/eslint-layers.js';
import { noTypeImportCycle } from './scripts/eslint-type-import-cycle.js';

/** The feature modules: each folder of src/modules, whose index.ts is what other modules may import. */
const MODULES = readdirSync(path.join(import.meta.dirname, 'src/modules'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name);

export default tseslint.config(
  { ignores: ['node_modules/', 'data/', 'files/', 'bench/results/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            {
              from: 'package',
              package: 'node:test',
              name: ['describe', 'it', 'test', 'suite', 'before', 'after'],
            },
          ],
        },
      ],
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    files: ['**/*.test.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
    },
  },
  // Layers and cycles. Imports name their files with the `.ts` extension, which import-x's node resolver
  // finds once it is told the extension. import-x/no-cycle follows runtime imports; a cycle that an
  // `import type` closes is local/no-type-import-cycle's (scripts/eslint-type-import-cycle.js).
  {
    files: ['**/*.ts'],
    plugins: {
      'import-x': importX,
      local: { rules: { 'no-type-import-cycle': noTypeImportCycle, 'no-upward-import': noUpwardImport } },
    },
    settings: {
      'import-x/extensions': ['.ts', '.js'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js'] })],
    },
    rules: {
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'local/no-type-import-cycle': 'error',
    },
  },
  // Tests may reach into any module to set up and observe.
  {
    files: ['src/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      // What the zones below say of one import, followed through every file it imports, type ones too.
      'local/no-upward-import': ['error', { layers: PROJECT_LAYERS }],
      'import-x/no-restricted-paths': [
        'error',
        {
          zones: [
            {
              target: ['./src/http', './src/db', './src/errors.ts'],
              from: './src/modules',
              message:
                'src/http, src/db and src/errors.ts are below the modules: pass what they need in instead.',
            },
            {
              target: './src/errors.ts',
              from: './src/db/dialects',
              message:
                'Using AppError must load no database driver: the adapters register their classifiers.',
            },
            ...MODULES.map((name) => ({
              target: `./src/modules/!(${name})/**/*`,
              from: `./src/modules/${name}`,
              except: ['./index.ts'],
              message: `Other modules import ${name} only through its index.ts.`,
            })),
          ],
        },
      ],
    },
  },
  { files: ['eslint.config.js', 'scripts/*.js'], ...tseslint.configs.disableTypeChecked },
  // Worker threads written in plain JavaScript (a `.ts` thread starts its own type stripper).
  { files: ['src/**/*.worker.js', 'bench/*.child.js'], ...tseslint.configs.disableTypeChecked },
  // Browser scripts served by the console: plain JavaScript outside the TypeScript project.
  {
    files: ['src/modules/console/assets/**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'script',
      globals: {
        window: 'readonly',
        document: 'readonly',
        fetch: 'readonly',
        URL: 'readonly',
        setTimeout: 'readonly',
      },
    },
  },
);
