// One revision's build or deploy log: follows new lines (polling the offset cursor), filters, downloads.
import { useEffect, useMemo, useRef, useState } from 'react';
import type { Api, LogEntry } from '../api.ts';
import { parseLogLine } from '../log-line.ts';
import { usePoll } from '../ui.tsx';

/** One line: JSON lines as level, time and message (the raw line a click away), others as they came. */
function LogLine({ entry }: { entry: LogEntry }) {
  const parsed = useMemo(() => parseLogLine(entry.message), [entry.message]);
  const [raw, setRaw] = useState(false);
  const ts = <span className="ts">{entry.timestamp.slice(11, 19)}</span>;
  if (!parsed) {
    return (
      <div className="log-line">
        {ts} {entry.message}
      </div>
    );
  }
  return (
    <div className={`log-line json level-${parsed.level ?? 'none'}`} data-level={parsed.level ?? ''}>
      {ts}{' '}
      {raw ? (
        <span className="raw">{entry.message}</span>
      ) : (
        <>
          {parsed.level && <span className="lvl">{parsed.level.toUpperCase()}</span>}{' '}
          <span className="msg">{parsed.message}</span>
          {parsed.extra && <span className="extra"> {parsed.extra}</span>}
          {parsed.error && <span className="error-text">{parsed.error}</span>}
        </>
      )}{' '}
      <button
        type="button"
        className="raw-toggle"
        aria-pressed={raw}
        title={raw ? 'Show readable' : 'Show the raw JSON line'}
        onClick={() => setRaw(!raw)}
      >
        {raw ? 'readable' : 'raw'}
      </button>
    </div>
  );
}

export function LogViewer({
  api,
  deploymentId,
  revisionId,
  type,
  fileName,
  live,
}: {
  api: Api;
  deploymentId: string;
  revisionId: string;
  type: 'build' | 'deploy';
  fileName: string;
  /** The revision is still moving: follow starts on. */
  live: boolean;
}) {
  const [lines, setLines] = useState<LogEntry[]>([]);
  // Follow is for a revision still moving; a finished one's log is read once and starts at the top, unticked.
  const [follow, setFollow] = useState(live);
  const [query, setQuery] = useState('');
  const [error, setError] = useState<string | null>(null);
  const cursor = useRef<string | undefined>(undefined);
  const box = useRef<HTMLPreElement>(null);
  const [loaded, setLoaded] = useState(false);

  const inFlight = useRef<Promise<void>>(Promise.resolve());
  // Calls queue behind each other: two reads from the same cursor would show lines twice.
  function fetchMore(): Promise<void> {
    inFlight.current = inFlight.current.then(readNewLines);
    return inFlight.current;
  }

  async function readNewLines() {
    try {
      // Drain every page after the cursor; the cursor is the id of the last line seen.
      for (;;) {
        const page = await api.logs(deploymentId, revisionId, { type, offset: cursor.current });
        if (page.logs.length) {
          cursor.current = page.logs[page.logs.length - 1]!.id;
          setLines((prev) => [...prev, ...page.logs]);
        }
        setError(null);
        if (!page.next_offset) break;
      }
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setLoaded(true);
    }
  }

  // A finished revision's log is read once; a live one (or follow switched on) keeps polling.
  usePoll(fetchMore, 1000, (follow && live) || !loaded, [deploymentId, revisionId, type, live]);

  // The last lines may land just before the revision settles: read once more when it does.
  useEffect(() => {
    if (!live) void fetchMore();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [live]);

  useEffect(() => {
    if (follow && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [lines, follow]);

  const shown = useMemo(() => {
    const q = query.trim().toLowerCase();
    return q ? lines.filter((l) => l.message.toLowerCase().includes(q)) : lines;
  }, [lines, query]);

  function download() {
    const text = lines.map((l) => `${l.timestamp} ${l.message}`).join('\n') + '\n';
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([text], { type: 'text/plain' }));
    a.download = fileName;
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  }

  return (
    <div className="logs" data-log-type={type}>
      <div className="log-tools">
        <label className="inline">
          <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.target.checked)} /> Follow
        </label>
        <input
          type="search"
          aria-label="Search the log"
          placeholder="search"
          value={query}
          onChange={(e) => setQuery(e.target.value)}
        />
        <span className="muted">
          {query ? `${shown.length} of ${lines.length} lines` : `${lines.length} lines`}
          {live && follow ? ' · live' : ''}
        </span>
        <button type="button" className="small secondary" onClick={download} disabled={!lines.length}>
          Download
        </button>
      </div>
      {error && <p className="error">{error}</p>}
      <pre ref={box} tabIndex={0} aria-label={`${type} log`} className="log-box">
        {shown.length === 0 ? (
          <span className="muted">{lines.length ? 'no line matches' : 'no output yet'}</span>
        ) : (
          shown.map((l) => <LogLine key={l.id} entry={l} />)
        )}
      </pre>
    </div>
  );
}
