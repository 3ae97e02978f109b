// The object path an upload URL names: `sources/<deployment id>/<upload id>.tar.gz`. It is all a client sends back
// to deploy the upload (source_tarball_path), so its shape is checked strictly before any lookup: no other folder,
// no "..", nothing but the two ids.
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const OBJECT_PATH = new RegExp(`^sources/(${UUID})/([0-9a-f]{32})\\.tar\\.gz$`);

export function objectPathOf(deploymentId: string, uploadId: string): string {
  return `sources/${deploymentId}/${uploadId}.tar.gz`;
}

/** The ids an object path names, or undefined when it is not one this control plane made. */
export function parseObjectPath(path: string): { deploymentId: string; uploadId: string } | undefined {
  const m = OBJECT_PATH.exec(path);
  return m ? { deploymentId: m[1]!, uploadId: m[2]! } : undefined;
}

export function objectPathProblem(path: string): string | undefined {
  return parseObjectPath(path)
    ? undefined
    : 'must be the object_path an upload URL answered (sources/<deployment id>/<upload id>.tar.gz)';
}
