//go:build !linux

package systemd

import "os"

func checkListeningTCP(*os.File) error { return nil }
