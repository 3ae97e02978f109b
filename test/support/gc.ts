// A full garbage collection on demand, in a worker that was not started with --expose-gc.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');
/** Runs a full (major) garbage collection now. */
export const fullGc = runInNewContext('gc') as () => void;
