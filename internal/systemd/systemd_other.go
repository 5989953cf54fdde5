//go:build !linux

package systemd

import "os"

func checkListeningTCP(*os.File) error { return nil }

func socketKind(*os.File) (bool, error) { return true, nil }
