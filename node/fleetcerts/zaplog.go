package fleetcerts

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapToSlog is CertMagic's zap logger writing to the node's slog logger. CertMagic logs
// names, issuers, errors and challenge identifiers; it never logs key material.
// onError, when set, sees every entry at error level or above with its fields.
func zapToSlog(l *slog.Logger, onError func(msg string, fields map[string]any)) *zap.Logger {
	return zap.New(&slogCore{log: l, onError: onError})
}

type slogCore struct {
	log     *slog.Logger
	fields  []zapcore.Field
	onError func(msg string, fields map[string]any)
}

func (c *slogCore) Enabled(lvl zapcore.Level) bool {
	return (c.onError != nil && lvl >= zapcore.ErrorLevel) || c.log.Enabled(context.Background(), slogLevel(lvl))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, fields: append(append([]zapcore.Field(nil), c.fields...), fields...), onError: c.onError}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	args := make([]any, 0, 2*len(enc.Fields)+2)
	if e.LoggerName != "" {
		args = append(args, "certmagic", e.LoggerName)
	}
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) { // stable lines
		args = append(args, k, enc.Fields[k])
	}
	c.log.Log(context.Background(), slogLevel(e.Level), e.Message, args...)
	if c.onError != nil && e.Level >= zapcore.ErrorLevel {
		c.onError(e.Message, enc.Fields)
	}
	return nil
}

func (c *slogCore) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l >= zapcore.ErrorLevel:
		return slog.LevelError
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}
