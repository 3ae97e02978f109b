// Reads an uploaded source tarball (gzip + tar, as `langgraph deploy` makes it) once, without writing any of it, and
// refuses what a build must never extract: absolute paths, "..", links leading out of the tree, hard links, device
// files and FIFOs, and archives that expand beyond a bound (a decompression bomb) or hold too many entries.
import { createReadStream } from 'node:fs';
import { posix } from 'node:path';
import { Transform } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { extract, type Header } from 'tar-stream';

export type TarballLimits = { maxExpandedBytes: number; maxEntries: number };

export const DEFAULT_TARBALL_LIMITS: TarballLimits = { maxExpandedBytes: 1024 * 1024 * 1024, maxEntries: 100_000 };

/** What is wrong with an archive, in one line that names the entry. */
export class TarballProblem extends Error {}

/** The problem with one entry's header, or undefined when a build may extract it. */
export function entryProblem(h: Pick<Header, 'name' | 'type' | 'linkname'>): string | undefined {
  const name = h.name;
  if (!name || name.includes('\0')) return 'an entry has an empty name or a NUL character';
  if (name.startsWith('/') || /^[A-Za-z]:/.test(name)) return `entry "${name}" has an absolute path`;
  if (name.split('/').includes('..')) return `entry "${name}" has a ".." path component`;
  switch (h.type) {
    case 'file':
    case 'contiguous-file':
    case 'directory':
      return undefined;
    case 'symlink': {
      const target = h.linkname ?? '';
      if (!target || target.includes('\0') || target.startsWith('/')) {
        return `symbolic link "${name}" points to an absolute path ("${target}")`;
      }
      const resolved = posix.normalize(posix.join(posix.dirname(name), target));
      if (resolved === '..' || resolved.startsWith('../')) {
        return `symbolic link "${name}" points out of the archive ("${target}")`;
      }
      return undefined;
    }
    case 'link':
      return `entry "${name}" is a hard link (not allowed in a source tarball)`;
    default:
      return `entry "${name}" is a ${h.type} (only files, folders and links inside the tree are allowed)`;
  }
}

/** Reads the whole archive; resolves with its entry count and expanded size, or rejects with a TarballProblem. */
export async function inspectTarball(
  file: string,
  limits: TarballLimits = DEFAULT_TARBALL_LIMITS,
): Promise<{ entries: number; expandedBytes: number }> {
  let expandedBytes = 0;
  let entries = 0;
  let failure: Error | undefined;
  // Each link is judged by its own path; an entry under a link would be written wherever the link leads (a chain of
  // links, each harmless alone, can lead out), so nothing may sit under one.
  const links = new Set<string>();
  const throughLink = (name: string): string | undefined => {
    const parts = posix.normalize(name).split('/').filter(Boolean);
    for (let i = 1; i < parts.length; i++) {
      const prefix = parts.slice(0, i).join('/');
      if (links.has(prefix)) return `entry "${name}" lies under the symbolic link "${prefix}"`;
    }
    return undefined;
  };
  const input = createReadStream(file);
  const gunzip = createGunzip();
  const tar = extract();
  // tar-stream's streams are streamx, not node streams: errors are wired by hand so each lands here, once.
  const fail = (err: Error) => {
    failure ??= err;
    input.destroy();
    gunzip.destroy();
    tar.destroy(failure);
  };
  const count = new Transform({
    transform(chunk: Buffer, _enc, done) {
      expandedBytes += chunk.length;
      if (expandedBytes > limits.maxExpandedBytes) {
        fail(new TarballProblem(`the archive expands to more than ${limits.maxExpandedBytes} bytes`));
        done();
      } else done(null, chunk);
    },
  });
  input.on('error', fail);
  gunzip.on('error', (err) => fail(new TarballProblem(`not a gzip-compressed tar archive (${err.message})`)));
  count.on('error', fail);
  tar.on('error', (err: Error) => fail(new TarballProblem(`not a tar archive (${err.message})`)));
  input
    .pipe(gunzip)
    .pipe(count)
    .pipe(tar as unknown as NodeJS.WritableStream);
  try {
    for await (const entry of tar) {
      entries += 1;
      const problem =
        entries > limits.maxEntries
          ? `the archive holds more than ${limits.maxEntries} entries`
          : (entryProblem(entry.header) ?? throughLink(entry.header.name));
      if (entry.header.type === 'symlink') links.add(posix.normalize(entry.header.name).replace(/\/$/, ''));
      if (problem) {
        fail(new TarballProblem(problem));
        break;
      }
      entry.resume();
    }
  } catch (err) {
    failure ??= err as Error;
  }
  if (failure) throw failure;
  if (entries === 0) throw new TarballProblem('the archive is empty');
  return { entries, expandedBytes };
}
