// An independent tlog-tiles client: Go's golang.org/x/mod/sumdb (note, tlog), reading a live
// evidenced daemon's transparency log over HTTP (tests/daemon/test_http_tlog.py).
//
// usage: tlog_http_client BASE_URL VERIFIER_KEY OLD_SIZE:OLD_ROOT_BASE64
//
// It opens GET /checkpoint with the verifier key (note.Open), reads the tree's tiles over
// HTTP through tlog.TileHashReader (which checks every tile it reads against the signed
// root), reads every entry from the entry bundles (GET /tile/entries/...), proves each
// entry's inclusion (tlog.ProveRecord, tlog.CheckRecord) and the tree's consistency with an
// older checkpoint's size and root (tlog.ProveTree, tlog.CheckTree). It prints one JSON line; any failure exits 1.
package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

var base string

func get(path string) ([]byte, string) {
	resp, err := http.Get(base + "/" + path)
	if err != nil {
		fail("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		fail("GET %s: %v", path, err)
	}
	if resp.StatusCode != 200 {
		fail("GET %s: HTTP %d: %s", path, resp.StatusCode, data)
	}
	return data, resp.Header.Get("Cache-Control")
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// c2sp maps Go's tile path (tile/8/L/N[.p/W], data tiles tile/8/data/N) to C2SP's.
func c2sp(t tlog.Tile) string {
	path := t.Path()
	path = strings.Replace(path, "tile/8/data/", "tile/entries/", 1)
	return strings.Replace(path, "tile/8/", "tile/", 1)
}

type httpTiles struct{ fetched map[string]string }

func (r *httpTiles) Height() int { return 8 }

func (r *httpTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, cache := get(c2sp(t))
		r.fetched[c2sp(t)] = cache
		out[i] = data
	}
	return out, nil
}

func (r *httpTiles) SaveTiles(tiles []tlog.Tile, data [][]byte) {}

func main() {
	if len(os.Args) != 4 {
		fail("usage: tlog_http_client BASE_URL VERIFIER_KEY OLD_SIZE:OLD_ROOT_BASE64")
	}
	base = strings.TrimSuffix(os.Args[1], "/")
	verifier, err := note.NewVerifier(os.Args[2])
	if err != nil {
		fail("verifier key: %v", err)
	}
	old := strings.SplitN(os.Args[3], ":", 2)
	oldSize, err := strconv.ParseInt(old[0], 10, 64)
	if err != nil || len(old) != 2 {
		fail("OLD_SIZE:OLD_ROOT_BASE64: %v", os.Args[3])
	}
	var oldHash tlog.Hash
	if decoded, err := base64.StdEncoding.DecodeString(old[1]); err != nil || len(decoded) != tlog.HashSize {
		fail("old root: %v", err)
	} else {
		copy(oldHash[:], decoded)
	}
	raw, checkpointCache := get("checkpoint")
	msg, err := note.Open(raw, note.VerifierList(verifier))
	if err != nil {
		fail("checkpoint: %v", err)
	}
	lines := strings.Split(msg.Text, "\n")
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		fail("checkpoint size: %v", err)
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		fail("checkpoint root: %v", err)
	}
	var tree tlog.Tree
	tree.N = size
	copy(tree.Hash[:], root)

	tiles := &httpTiles{fetched: map[string]string{}}
	reader := tlog.TileHashReader(tree, tiles)
	// Entries from the bundles, each proved included under the signed root.
	proved := int64(0)
	for bundle := int64(0); bundle*256 < size; bundle++ {
		width := size - bundle*256
		if width > 256 {
			width = 256
		}
		tile := tlog.Tile{H: 8, L: -1, N: bundle, W: int(width)}
		data, cache := get(c2sp(tile))
		tiles.fetched[c2sp(tile)] = cache
		for i := int64(0); i < width; i++ {
			if len(data) < 2 {
				fail("bundle %d is short", bundle)
			}
			n := int(binary.BigEndian.Uint16(data[:2]))
			entry := data[2 : 2+n]
			data = data[2+n:]
			index := bundle*256 + i
			proof, err := tlog.ProveRecord(size, index, reader)
			if err != nil {
				fail("prove record %d: %v", index, err)
			}
			if err := tlog.CheckRecord(proof, size, tree.Hash, index, tlog.RecordHash(entry)); err != nil {
				fail("check record %d: %v", index, err)
			}
			proved++
		}
	}
	consistent := false
	if oldSize > 0 {
		proof, err := tlog.ProveTree(size, oldSize, reader)
		if err != nil {
			fail("prove tree: %v", err)
		}
		if err := tlog.CheckTree(proof, size, tree.Hash, oldSize, oldHash); err != nil {
			fail("check tree: %v", err)
		}
		consistent = true
	}
	out, _ := json.Marshal(map[string]interface{}{
		"origin": lines[0], "size": size, "proved": proved, "consistent": consistent,
		"checkpoint_cache": checkpointCache, "tiles": tiles.fetched,
	})
	fmt.Println(string(out))
}
