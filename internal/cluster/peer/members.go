package peer

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MembersName is the file at the root of a node's tree of a partitioned
// version (internal/cluster/publish) that tells the node the cluster's membership
// as of that version: its own index and every node's address in the
// front's order. A node that commits such a version adopts it (SetPeers),
// so a node that joins or leaves a running cluster is known to every
// other node from the version that gives it its share, without a restart.
// The file is trusted as the version's manifest is: the coordinator wrote
// it into the node's tree inside its publish folder, and named that tree
// in a prepare that carried the cluster's admin token (or in-process).
// The leading dot keeps it out of the URL table.
const MembersName = ".shoal-peers"

// membersMagic is the file's first line (format version 1).
const membersMagic = "shoal-peers 1"

// WriteMembers writes self and peers: the magic line, "self N", then one
// line per slot, the address or "-" for a slot whose node left.
func WriteMembers(w io.Writer, self int, peers []string) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s\nself %d\n", membersMagic, self)
	for _, a := range peers {
		if a == "-" || strings.ContainsAny(a, " \t\r\n") {
			return fmt.Errorf("peers: address %q", a)
		}
		if a == "" {
			a = "-"
		}
		bw.WriteString(a + "\n")
	}
	return bw.Flush()
}

// ReadMembers parses a file written by WriteMembers. self is -1 when this
// node is not listed.
func ReadMembers(r io.Reader) (self int, peers []string, err error) {
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	if !sc.Scan() || sc.Text() != membersMagic {
		return -1, nil, fmt.Errorf("peers: not a %q file", membersMagic)
	}
	if !sc.Scan() {
		return -1, nil, fmt.Errorf("peers: no self line")
	}
	v, ok := strings.CutPrefix(sc.Text(), "self ")
	if self, err = strconv.Atoi(v); !ok || err != nil || self < -1 {
		return -1, nil, fmt.Errorf("peers: bad self line %q", sc.Text())
	}
	for sc.Scan() {
		a := sc.Text()
		if a == "-" {
			a = ""
		} else if a == "" || strings.ContainsAny(a, " \t\r") {
			return -1, nil, fmt.Errorf("peers: bad address %q", a)
		}
		peers = append(peers, a)
	}
	if err := sc.Err(); err != nil {
		return -1, nil, fmt.Errorf("peers: %w", err)
	}
	if self >= len(peers) || self >= 0 && peers[self] == "" {
		return -1, nil, fmt.Errorf("peers: self %d is not a listed address", self)
	}
	return self, peers, nil
}
