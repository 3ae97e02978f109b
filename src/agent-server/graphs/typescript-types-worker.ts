// The thread that runs the compiler pass over a project's graph files (typeScriptSchemas), so its seconds of
// synchronous work never hold the server's event loop; the result goes back as plain JSON.
import { parentPort, workerData } from 'node:worker_threads';
import { typeScriptSchemas, type GraphSource } from './typescript-types.ts';

const result = await typeScriptSchemas((workerData as { sources: GraphSource[] }).sources);
parentPort!.postMessage([...result].map(([graphId, byNs]) => [graphId, [...byNs]]));
