// Loads a package from the test lab's pinned node_modules (tests/lab), so
// the benchmarks' peers run the same versions the tests install.
'use strict';
const fs = require('fs');
const path = require('path');

module.exports = function labRequire(name) {
  const dirs = [];
  if (process.env.KN_SOURCE_DIR) dirs.push(path.join(process.env.KN_SOURCE_DIR, 'tests/lab/node_modules'));
  dirs.push(path.join(__dirname, '..', 'tests/lab/node_modules'));
  for (const d of dirs) {
    if (fs.existsSync(path.join(d, name))) return require(path.join(d, name));
  }
  throw new Error(name + ' not found in ' + dirs.join(', '));
};
