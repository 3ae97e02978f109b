// The stylesheet main.tsx imports for its effect: esbuild bundles it with the scripts (console/build.mjs); to
// TypeScript it is a module without exports.
declare module '*.css';
