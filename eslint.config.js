// Lint rules for the whole repository (ESLint flat config): ESLint's and typescript-eslint's recommended sets,
// plus the few choices below. Formatting is Prettier's business, not the linter's.
import js from '@eslint/js';
import reactHooks from 'eslint-plugin-react-hooks';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'coverage/', 'charts/', 'crds/', 'docs/', 'bench/results/', '.agentplane/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      // `_`-prefixed names mark parameters and bindings kept for their position or shape.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true },
      ],
    },
  },
  {
    files: ['console/**/*.tsx', 'console/**/*.ts'],
    plugins: { 'react-hooks': reactHooks },
    rules: { 'react-hooks/rules-of-hooks': 'error', 'react-hooks/exhaustive-deps': 'warn' },
  },
  {
    // Plain JavaScript runs on Node: its globals are not declared anywhere ESLint can see.
    files: ['**/*.js', '**/*.mjs'],
    rules: { 'no-undef': 'off' },
  },
  {
    // Tests poke at untyped JSON from the wire.
    files: ['test/**', 'bench/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
