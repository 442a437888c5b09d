'use strict';
// Preload (`node -r ./lifeline.js ...`) that ends the server when the process
// that started it goes away, even if that process was killed with SIGKILL and
// could not clean up. lab.py gives each server a pipe as stdin and never
// writes to it; the kernel closes the write end when lab.py's process exits,
// which we see here as end-of-file.
//
// Active only when KN_LAB_LIFELINE=1, so running a server by hand with a
// terminal or /dev/null as stdin is unaffected.

if (process.env.KN_LAB_LIFELINE === '1') {
  const exit = () => process.exit(0);
  process.stdin.on('end', exit);
  process.stdin.on('close', exit);
  process.stdin.on('error', exit);
  process.stdin.resume();
}
