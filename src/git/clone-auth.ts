// How a clone hands its credential to git. Never in argv (visible in `ps`), the URL, a log line or a status: a
// token through a GIT_ASKPASS helper that reads it from a file, an SSH key through GIT_SSH_COMMAND with only the
// known_hosts given. A credentialed clone follows no HTTP redirect (the credential is for the repository's host).
// Two forms of the same strategy: files written next to a local build (the local runtime), and a shell prelude that
// reads them from a mounted Secret (the Kubernetes build Job's clone step).
import { chown, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { GitCredential } from './credentials.ts';
import { splitCredentials } from './redact.ts';
import { repoHostOf } from './url.ts';

/**
 * Files of a credential as the clone step reads them (the keys of a Kubernetes basic-auth or ssh-auth Secret):
 * username + password (HTTPS), or ssh-privatekey + known_hosts.
 */
export function credentialFiles(credential: GitCredential): Record<string, string> {
  return 'token' in credential
    ? { username: credential.username ?? 'x-access-token', password: credential.token }
    : { 'ssh-privatekey': credential.sshKey, known_hosts: credential.knownHosts };
}

/** Shell prelude of a clone: sets git up from the files in $GIT_CREDENTIALS_DIR, if any (see credentialFiles). */
export const GIT_AUTH_SCRIPT = `dir="\${GIT_CREDENTIALS_DIR:-}"
if [ -n "$dir" ]; then
  export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=http.followRedirects GIT_CONFIG_VALUE_0=false
fi
if [ -n "$dir" ] && [ -f "$dir/password" ]; then
  askpass="\${TMPDIR:-/tmp}/agentplane-askpass"
  printf '#!/bin/sh\\ncase "$1" in Username*) if [ -f "%s/username" ]; then cat "%s/username"; else echo git; fi ;; *) cat "%s/password" ;; esac\\n' "$dir" "$dir" "$dir" > "$askpass"
  chmod 700 "$askpass"
  export GIT_ASKPASS="$askpass"
fi
if [ -n "$dir" ] && [ -f "$dir/ssh-privatekey" ]; then
  key="\${TMPDIR:-/tmp}/agentplane-ssh-key"
  cp "$dir/ssh-privatekey" "$key" && chmod 600 "$key"
  export GIT_SSH_COMMAND="ssh -i $key -o IdentitiesOnly=yes -o UserKnownHostsFile=$dir/known_hosts -o StrictHostKeyChecking=yes"
fi
`;

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

export type CloneAuth = {
  /** The URL to clone, without the credentials it carried. */
  url: string;
  /** Environment of the clone (GIT_ASKPASS, GIT_SSH_COMMAND and what they read). */
  env: Record<string, string>;
  /** git options placed before `clone`. */
  options: string[];
  /** Removes the files written for the clone; call once it has ended. */
  cleanup(): Promise<void>;
};

/**
 * Prepares a local clone of `repoUrl`: credentials in the URL, or `credential` when it is for the URL's host (a
 * token over http(s), a key over ssh), are written to 0600 files in `dir` (the username goes in the environment),
 * owned by `owner` when given.
 */
export async function localCloneAuth(
  dir: string,
  repoUrl: string,
  credential?: GitCredential,
  /** The account git runs as (the sandbox's, when the platform runs as root): the files become its own. */
  owner?: { uid: number; gid: number },
): Promise<CloneAuth> {
  const parts = splitCredentials(repoUrl);
  const { url } = parts;
  let { username, password } = parts;
  const http = /^https?:\/\//i.test(url);
  const env: Record<string, string> = {};
  const temporary: string[] = [];
  const options: string[] = [];
  const cleanup = async () => {
    for (const f of temporary) await rm(f, { force: true });
  };
  if (credential && 'token' in credential && http && repoHostOf(url) === credential.host) {
    username = credential.username ?? 'x-access-token';
    password = credential.token;
  }
  if (credential && 'sshKey' in credential && !http && repoHostOf(url) === credential.host) {
    const key = join(dir, '.git-ssh-key');
    const knownHosts = join(dir, '.git-known-hosts');
    temporary.push(key, knownHosts);
    await writeFile(key, credential.sshKey, { mode: 0o600, flag: 'wx' });
    await writeFile(
      knownHosts,
      credential.knownHosts.endsWith('\n') ? credential.knownHosts : `${credential.knownHosts}\n`,
      { mode: 0o600, flag: 'wx' },
    );
    // Only this key, only these host keys (a host key not in them fails the clone), no agent, no user config.
    env.GIT_SSH_COMMAND = [
      'ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityAgent=none',
      `-o StrictHostKeyChecking=yes -o UserKnownHostsFile=${shellQuote(knownHosts)} -o GlobalKnownHostsFile=/dev/null`,
      `-i ${shellQuote(key)}`,
    ].join(' ');
    env.GIT_SSH_VARIANT = 'ssh';
  }
  const askpass = join(dir, '.git-askpass');
  const secretFile = join(dir, '.git-credential');
  if (username !== undefined || password !== undefined) {
    temporary.push(secretFile, askpass);
    await writeFile(secretFile, password ?? '', { mode: 0o600, flag: 'wx' });
    await writeFile(
      askpass,
      '#!/bin/sh\ncase "$1" in Username*) printf "%s\\n" "$AP_GIT_USERNAME" ;; *) cat "$AP_GIT_SECRET_FILE"; echo ;; esac\n',
      { mode: 0o700 },
    );
    Object.assign(env, { GIT_ASKPASS: askpass, AP_GIT_USERNAME: username ?? '', AP_GIT_SECRET_FILE: secretFile });
  }
  if (temporary.length) options.push('-c', 'http.followRedirects=false');
  if (owner) for (const f of temporary) await chown(f, owner.uid, owner.gid);
  return { url, env, options, cleanup };
}
