// Preloaded (node --import) into every agent server the local runtime starts: the server exits when the process
// that started it goes away, even when that one was killed with SIGKILL, because the stdin pipe then closes.
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
