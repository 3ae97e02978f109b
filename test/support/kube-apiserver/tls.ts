// A self-signed serving certificate for 127.0.0.1, made once per machine with openssl. kubectl (client-go) sends
// bearer tokens only over TLS, so the double serves HTTPS when real kubectl talks to it.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export type ServingCert = { key: string; cert: string };

export function servingCert(): ServingCert {
  // One folder per user: another user's copy in the shared temp folder could be neither written nor trusted.
  const dir = join(tmpdir(), `agentplane-kube-apiserver-tls-${userInfo().uid}`);
  const key = join(dir, 'tls.key');
  const cert = join(dir, 'tls.crt');
  if (!existsSync(cert)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const tmp = `${process.pid}-${Date.now()}`;
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '3650',
        '-subj',
        '/CN=kube-apiserver-double',
        '-addext',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
        '-keyout',
        `${key}.${tmp}`,
        '-out',
        `${cert}.${tmp}`,
      ],
      { stdio: 'pipe' },
    );
    renameSync(`${key}.${tmp}`, key);
    renameSync(`${cert}.${tmp}`, cert);
  }
  return { key: readFileSync(key, 'utf8'), cert: readFileSync(cert, 'utf8') };
}
