// Entry of the thread that reads graphs' TypeScript types (see typescript-types.ts): its own sources load through tsx.
import { register } from 'tsx/esm/api';

register();
await import('./typescript-types-worker.ts');
