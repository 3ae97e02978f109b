// A graph that fails to load is told in the project's own terms: its files relative to the project (the folder of
// langgraph.json, as the user wrote its paths), and where in the user's own code the error was thrown
// (file:line:column from the stack, tsx mapping TypeScript back to its source), never the platform's frames.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** `file` relative to the project when inside it (as langgraph.json names it), else as it is. */
export function projectPath(file: string, projectDir: string): string {
  const rel = path.relative(projectDir, file);
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : file;
}

/** Absolute paths and file URLs of the project in `text`, made relative to it. */
export function relativeToProject(text: string, projectDir: string): string {
  const dir = projectDir.endsWith(path.sep) ? projectDir : projectDir + path.sep;
  return text.split(`file://${dir}`).join('').split(dir).join('');
}

const FRAME = /^\s*at (?:.*? \()?(file:\/\/[^\s)]+|\/[^\s)]+):(\d+):(\d+)\)?\s*$/;

/** The first frame of the stack in the project's own files (not its packages): `src/agent.ts:3:9`. */
export function userFrame(err: unknown, projectDir: string): string | undefined {
  const stack = (err as { stack?: unknown } | null)?.stack;
  if (typeof stack !== 'string') return undefined;
  for (const line of stack.split('\n')) {
    const m = FRAME.exec(line);
    if (!m) continue;
    const file = m[1]!.startsWith('file://') ? safeFilePath(m[1]!) : m[1]!;
    if (!file) continue;
    const rel = projectPath(file, projectDir);
    if (rel === file || rel.split(path.sep).includes('node_modules')) continue;
    return `${rel}:${m[2]}:${m[3]}`;
  }
  return undefined;
}

function safeFilePath(url: string): string | undefined {
  try {
    return fileURLToPath(url);
  } catch {
    return undefined;
  }
}

/** esbuild's syntax error (TypeScript loaded through tsx): a heading, then `<file>:<line>:<column>: ERROR: <text>`. */
const TRANSFORM_HEADING = /^Transform failed with \d+ errors?:$/;
const ESBUILD_ERROR = /^(.+?):(\d+):(\d+): ERROR: (.*)$/;

/** The first syntax error as `file:line:column: text` (esbuild counts columns from 0, editors from 1). */
function syntaxError(message: string, projectDir: string): string | undefined {
  const [heading, first] = message.split('\n');
  if (!TRANSFORM_HEADING.test(heading!.trim())) return undefined;
  const m = ESBUILD_ERROR.exec(first?.trim() ?? '');
  if (!m) return undefined;
  return `${projectPath(m[1]!, projectDir)}:${m[2]}:${Number(m[3]) + 1}: ${relativeToProject(m[4]!, projectDir)}`;
}

/** An error's first line in the project's terms, with where the user's code threw it when the stack says. */
export function inUserTerms(err: unknown, projectDir: string): string {
  const full = (err as Error)?.message ?? String(err);
  const syntax = syntaxError(full, projectDir);
  if (syntax) return syntax;
  const message = relativeToProject(full.split('\n')[0]!, projectDir);
  const at = userFrame(err, projectDir);
  return at && !message.includes(at) ? `${at}: ${message}` : message;
}
