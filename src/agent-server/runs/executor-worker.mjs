// Entry of an executor thread: TypeScript (ours and users' graphs) loads through tsx here too.
import { register } from 'tsx/esm/api';

register();
await import('./executor-worker.ts');
