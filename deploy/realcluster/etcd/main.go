// Command etcd is etcd's own server entry point, built from the Go module proxy for the local
// control plane (deploy/realcluster); nothing here but the call into etcdmain.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
