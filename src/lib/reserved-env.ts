// Environment variable names a deployment's secrets may not use. Each one is obeyed by something that runs before
// or around the workspace's own code: the dynamic loader and glibc (LD_*, GCONV_PATH, ...: code or data loaded from
// a path the workspace names), shells (BASH_ENV, ENV, IFS, ...: commands run or split differently) and Node itself
// (NODE_OPTIONS: code required into every Node process, flags over the runtime's own). The control plane refuses
// them with a 422 and the local runtime refuses to start a server given one, so a value stored before the rule
// existed, or handed over by a listener, is refused too. PATH is allowed: the runtimes start their own programs by
// absolute path, so it is only read by the agent's own processes.

/** Names obeyed before the workspace's code runs, and why (one phrase, for the message). */
const RESERVED = new Map<string, string>(
  Object.entries({
    GCONV_PATH: 'glibc loads character-set modules from it',
    GETCONF_DIR: 'glibc reads it',
    GLIBC_TUNABLES: 'glibc reads it in every process',
    HOSTALIASES: 'the resolver reads the file it names',
    LOCPATH: 'glibc loads locale data from it',
    MALLOC_TRACE: 'glibc writes to the file it names',
    NLSPATH: 'glibc loads message catalogs from it',
    RESOLV_HOST_CONF: 'the resolver reads the file it names',
    BASH_ENV: 'shells run the file it names',
    ENV: 'shells run the file it names',
    BASHOPTS: 'it changes how shells run commands',
    SHELLOPTS: 'it changes how shells run commands',
    PS4: 'shells expand it when tracing',
    IFS: 'it changes how shells split commands',
    NODE_OPTIONS: 'Node applies it to every process it starts',
  }),
);

/** Why a secret may not have this name, or undefined when it may. */
export function reservedEnvName(name: string): string | undefined {
  if (name.startsWith('LD_')) return `secret ${name} is reserved: the dynamic loader obeys LD_* variables`;
  const why = RESERVED.get(name);
  return why ? `secret ${name} is reserved: ${why}` : undefined;
}
